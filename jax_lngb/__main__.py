"""`python -m jax_lngb`: the `jax-lngb` command (jax_lngb.cli.main)."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
