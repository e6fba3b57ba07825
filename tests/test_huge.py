"""More than 2^31 elements: bf16 res_for_gamma and dy of shape
[2^21 + 3, 1024] (2^31 + 3072 elements each, 8.6 GB together) through the
real custom call, against a chunked float64 reference.

The values are small integers (res and dy in {-2, -1, 1, 2}), so every
float32 partial sum is an exact integer below 2^24: the kernel must reproduce the
float64 sums exactly, and a dropped, repeated or misaddressed row (a 32-bit
offset wrapping around, say) cannot hide inside a rounding bound. The rows
past element 2^31 hold values the first rows do not, so a wrapped offset
changes every column. The same buffers, viewed as 5 vmapped groups, check
the grouped path (the last group's rows lie past element 2^31).

Memory: the inputs are generated straight into 64-byte aligned bf16 buffers
(no float64 or float32 copy of a whole array) that XLA then uses in place;
the reference works on 2048-row chunks. Peak RSS is about the 8.6 GB of
inputs plus a few hundred MB. Skipped, with the numbers, when the machine
(or its cgroup) has less memory available than that; marked huge_memory, so
that no other such test runs at the same time (tests/conftest.py).

Time: generating 2^32 random values and their reference dominates the test,
so each chunk takes its values from the raw output of a bit generator (one
32-bit word per value: its sign bit and bit 23 pick the value) and reduces
them in float32, exact here, with a few passes over the chunk.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import resource
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_lngb import layer_norm_grad_beta

ROWS, H = 2**21 + 3, 1024
GROUPS = 5  # ROWS = 5 * 419431
GROUP_ROWS = ROWS // GROUPS
N = ROWS * H
INPUT_BYTES = 2 * N * 2
HEADROOM = int(1.5 * 2**30)
# Rows per chunk: the random words (16 MiB) stay under glibc's mmap
# threshold, so they are recycled instead of page-faulted in afresh.
GEN_CHUNK = 2048
BF16 = np.dtype(jnp.bfloat16)

assert N > 2**31 and GROUPS * GROUP_ROWS == ROWS and GROUP_ROWS * H * (GROUPS - 1) < 2**31 < N


def available_memory() -> tuple[int, str]:
    """Bytes this process may still allocate, and where the figure comes from."""
    avail, source = None, "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail, source = int(line.split()[1]) * 1024, "MemAvailable"
    except OSError:
        pass
    # A container's cgroup limit may be lower than what the host has free.
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and (avail is None or int(limit) - usage < avail):
            avail, source = int(limit) - usage, f"cgroup limit {int(limit) / 2**30:.1f} GiB"
    return (avail if avail is not None else 0), source


def aligned_empty(shape, dtype, align: int = 64) -> np.ndarray:
    """An uninitialised array whose data is `align`-byte aligned, so that
    jax.device_put can use it in place instead of copying it."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off : off + nbytes].view(dtype).reshape(shape)


def bf16_bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(BF16).view(np.uint16)


def f32_bits(value: float) -> int:
    return int(np.float32(value).view(np.uint32))


# Random words -> float32 bit patterns of {-2, -1, 1, 2}: keep the sign bit
# and bit 23 (the exponent's lowest), add the pattern of 1.0. Bit 23 set
# turns 1.0 (0x3F800000) into 2.0 (0x40000000); all four are exact in bf16,
# whose bits are the float32 bits' upper half.
SIGN_AND_EXP_LSB = 0x80800000
ONE_F32 = 0x3F800000
assert {f32_bits(v) for v in (1, 2, -1, -2)} == {ONE_F32 + m for m in (0, 0x00800000, 0x80000000, 0x80800000)}


# A wrapped 32-bit offset would read rows 0-2 instead of the last three:
# (res, dy) there are (-2, -2) and (2, 1), so both res * dy and dy differ.
SPECIAL_ROWS = {
    0: (-2.0, -2.0),
    1: (-2.0, -2.0),
    2: (-2.0, -2.0),
    ROWS - 3: (2.0, 1.0),
    ROWS - 2: (2.0, 1.0),
    ROWS - 1: (2.0, 1.0),
}


def fill_and_reference(res: np.ndarray, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Writes random inputs chunk by chunk and returns the float64 [GROUPS, H]
    sums of res * dy and of dy over each group's rows, computed from each
    chunk as it is written.

    Chunks run on a few threads (NumPy releases the GIL; on a VM, touching
    8.6 GB of fresh memory is slow enough to be worth sharing out); each has
    its own seeded bit generator, so the data never depend on scheduling,
    and chunks never straddle a group boundary. A chunk's sums are exact in
    float32 (integers of magnitude at most 4 * GEN_CHUNK < 2^24) and are
    added up in float64, exact too."""
    res_bits, dy_bits = res.view(np.uint16), dy.view(np.uint16)
    chunks = [
        (grp, r0, min((grp + 1) * GROUP_ROWS, r0 + GEN_CHUNK))
        for grp in range(GROUPS)
        for r0 in range(grp * GROUP_ROWS, (grp + 1) * GROUP_ROWS, GEN_CHUNK)
    ]

    def work(index: int) -> tuple[int, np.ndarray, np.ndarray]:
        grp, r0, r1 = chunks[index]
        # One 32-bit word per value: [0] for res, [1] for dy.
        words = np.random.PCG64([2024, index]).random_raw((r1 - r0) * H).view(np.uint32).reshape(2, r1 - r0, H)
        np.bitwise_and(words, SIGN_AND_EXP_LSB, out=words)
        np.add(words, ONE_F32, out=words)
        for row, (rv, dv) in SPECIAL_ROWS.items():
            if r0 <= row < r1:
                words[0, row - r0], words[1, row - r0] = f32_bits(rv), f32_bits(dv)
        np.right_shift(words[0], 16, out=res_bits[r0:r1], casting="unsafe")
        np.right_shift(words[1], 16, out=dy_bits[r0:r1], casting="unsafe")
        r, d = words.view(np.float32)
        sum_d = d.sum(0)
        np.multiply(r, d, out=r)
        return grp, r.sum(0).astype(np.float64), sum_d.astype(np.float64)

    g, b = np.zeros((GROUPS, H)), np.zeros((GROUPS, H))
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        for grp, cg, cb in pool.map(work, range(len(chunks))):
            g[grp] += cg  # integers: exact in any order
            b[grp] += cb
    return g, b


@pytest.mark.slow
@pytest.mark.huge_memory
def test_more_than_2_pow_31_elements(record_property):
    avail, source = available_memory()
    if avail < INPUT_BYTES + HEADROOM:
        pytest.skip(
            f"needs {(INPUT_BYTES + HEADROOM) / 2**30:.1f} GiB of free memory (two bf16 [{ROWS}, {H}] inputs, "
            f"{INPUT_BYTES / 2**30:.1f} GiB, plus {HEADROOM / 2**30:.1f} GiB working space); "
            f"{avail / 2**30:.1f} GiB available ({source})"
        )
    t0 = time.perf_counter()
    res = aligned_empty((ROWS, H), BF16)
    dy = aligned_empty((ROWS, H), BF16)
    ref_g, ref_b = fill_and_reference(res, dy)
    t_gen = time.perf_counter()

    res_d, dy_d = jax.device_put(res), jax.device_put(dy)
    # In place, not copied: otherwise the inputs would need twice the memory.
    assert res_d.unsafe_buffer_pointer() == res.ctypes.data
    assert dy_d.unsafe_buffer_pointer() == dy.ctypes.data

    g32, b32 = jax.jit(functools.partial(layer_norm_grad_beta, out_dtype=jnp.float32))(res_d, dy_d)
    g16, b16 = jax.jit(layer_norm_grad_beta)(res_d, dy_d)
    f32_sums = functools.partial(layer_norm_grad_beta, out_dtype=jnp.float32)
    grouped = jax.jit(
        lambda r, d: jax.vmap(f32_sums)(r.reshape(GROUPS, GROUP_ROWS, H), d.reshape(GROUPS, GROUP_ROWS, H))
    )
    gg, gb = grouped(res_d, dy_d)
    jax.block_until_ready((g32, b32, g16, b16, gg, gb))
    t_kernel = time.perf_counter()
    tot_g, tot_b = ref_g.sum(0), ref_b.sum(0)
    # Exact integers below 2^24: float32 holds them, every partial sum too.
    assert np.abs(tot_g).max() < 2**24 and np.all(tot_g == np.round(tot_g))
    np.testing.assert_array_equal(np.asarray(g32, np.float64), tot_g)
    np.testing.assert_array_equal(np.asarray(b32, np.float64), tot_b)
    # Default output dtype: the exact float32 sums rounded once to bf16.
    np.testing.assert_array_equal(np.asarray(g16).view(np.uint16), bf16_bits(tot_g))
    np.testing.assert_array_equal(np.asarray(b16).view(np.uint16), bf16_bits(tot_b))
    np.testing.assert_array_equal(np.asarray(gg, np.float64), ref_g)
    np.testing.assert_array_equal(np.asarray(gb, np.float64), ref_b)

    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    record_property("generate_and_reference_s", round(t_gen - t0, 1))
    record_property("kernels_s", round(t_kernel - t_gen, 1))
    record_property("peak_rss_gib", round(peak_gib, 2))
    print(
        f"\nhuge: inputs + float64 reference {t_gen - t0:.1f} s, 3 kernel calls {t_kernel - t_gen:.1f} s, "
        f"peak RSS {peak_gib:.2f} GiB"
    )
