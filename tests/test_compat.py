"""jax_lngb._compat: the newest jax the suite has passed on, and
newer_than_tested, which `jax-lngb info` uses to flag a newer one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jax_lngb import _compat
from jax_lngb._compat import TESTED_JAX_UP_TO, newer_than_tested

ROOT = Path(__file__).resolve().parents[1]


def _bump(version: str, index: int) -> str:
    parts = [int(p) for p in version.split(".")]
    parts += [0] * (index + 1 - len(parts))
    parts[index] += 1
    return ".".join(map(str, parts[: index + 1] + [0] * (len(parts) - index - 1)))


def test_tested_version_is_a_plain_release_within_the_declared_range():
    assert re.fullmatch(r"\d+\.\d+\.\d+", TESTED_JAX_UP_TO), TESTED_JAX_UP_TO
    low = re.search(r'"jax>=([0-9.]+)', (ROOT / "pyproject.toml").read_text()).group(1)
    assert not newer_than_tested(low)
    assert _compat._release(low) <= _compat._release(TESTED_JAX_UP_TO)


def test_the_tested_release_and_older_ones_are_not_newer():
    assert newer_than_tested(TESTED_JAX_UP_TO) is False
    for older in ("0.7.2", "0.4.38", "0.10.2"):
        assert newer_than_tested(older) is False, older
    # Trailing zeros, a leading v and a pre-, post-, dev or local build of
    # the tested release itself.
    for same in (
        TESTED_JAX_UP_TO + ".0",
        "v" + TESTED_JAX_UP_TO,
        TESTED_JAX_UP_TO + "rc1",
        TESTED_JAX_UP_TO + ".post1",
        TESTED_JAX_UP_TO + ".dev20260101",
        TESTED_JAX_UP_TO + "+cuda12",
    ):
        assert newer_than_tested(same) is False, same


@pytest.mark.parametrize("index", [0, 1, 2])
def test_later_releases_are_newer(index):
    later = _bump(TESTED_JAX_UP_TO, index)
    assert newer_than_tested(later) is True, later
    # A development build of a later release is newer too.
    assert newer_than_tested(later + ".dev20260101") is True, later


def test_numbers_compare_as_numbers_not_text():
    major, minor, _ = (int(p) for p in TESTED_JAX_UP_TO.split("."))
    # "0.9" sorts after "0.12" as text; as a release it is older.
    assert newer_than_tested(f"{major}.{max(minor - 3, 0)}.9") is False
    assert newer_than_tested(f"{major}.{minor + 10}.0") is True


@pytest.mark.parametrize("bad", ["", "jax", "latest", ".1.2"])
def test_a_string_without_a_release_number_is_refused(bad):
    with pytest.raises(ValueError, match=r"version .* release number"):
        newer_than_tested(bad)


@pytest.mark.parametrize("bad", [None, 12, (0, 12, 1)])
def test_a_non_string_is_refused(bad):
    with pytest.raises(TypeError, match="version must be a str"):
        newer_than_tested(bad)
