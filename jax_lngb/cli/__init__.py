"""The `jax-lngb` command (`main`: info, demo, bench) and the demo."""
