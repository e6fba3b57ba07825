"""Compares jax_lngb.tiling with CANN's own host tiling, field by field.

    python compare.py --driver DRIVER --devkit DEVKIT_DIR

DRIVER is the program compare_tiling_with_cann.sh builds from asc-devkit's
tiling sources and driver.cc; DEVKIT_DIR the asc-devkit checkout, whose
``*_tilingdata.h`` headers give the names, types and order of the fields.
The interpreter must import jax_lngb (installed, or the working tree after
cpp/dev_build.sh).

Every case runs through both sides: the temporary-buffer bounds
(Get*MaxMinTmpSize) and the tiling (Get*NDTilingInfo / GetRmsNormTilingInfo).
Outcomes:

* both produce results: every field must be equal (floats bit for bit);
* both reject: CANN returns false, logs an error, or leaves the tiling unset
  (all zero), and jax_lngb raises ValueError;
* jax_lngb rejects what CANN accepts, for a reason checked on CANN's own
  output: a type size other than 2 or 4, or a buffer below the minimum that
  CANN's Get*MaxMinTmpSize reports for the same case;
* anything else is a mismatch.

Exit status 0 when there is no mismatch and the field lists agree, 1
otherwise. The last line is ``SUMMARY {json}`` with the counts per API.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jax_lngb import tiling

U32 = 2**32 - 1


@dataclass
class Api:
    key: str
    name: str
    header: str  # asc-devkit's tiling data definition
    struct: str
    ours: type
    max_min: Callable[..., tuple[int, int]]
    nd: Callable[..., Any]


def _lng_max_min(c):
    return tiling.get_layer_norm_grad_max_min_tmp_size(c.dims, c.ts, c.flag, npu_arch=f"dav-{c.arch}")


def _lng_nd(c):
    return tiling.get_layer_norm_grad_nd_tiling_info(c.dims, c.stack, c.ts, c.flag, npu_arch=f"dav-{c.arch}")


APIS = {
    a.key: a
    for a in (
        Api(
            "lngb",
            "LayerNormGradBeta",
            "layernorm_grad_beta_tilingdata.h",
            "LayerNormGradBetaTiling",
            tiling.LayerNormGradBetaTiling,
            lambda c: tiling.get_layer_norm_grad_beta_max_min_tmp_size(c.dims, c.ts, c.flag),
            lambda c: tiling.get_layer_norm_grad_beta_nd_tiling_info(c.dims, c.stack, c.ts, c.flag),
        ),
        Api(
            "lng",
            "LayerNormGrad",
            "layernorm_grad_tilingdata.h",
            "LayerNormGradTiling",
            tiling.LayerNormGradTiling,
            _lng_max_min,
            _lng_nd,
        ),
        Api(
            "ln",
            "LayerNorm",
            "layernorm_tilingdata.h",
            "LayerNormTiling",
            tiling.LayerNormTiling,
            lambda c: tiling.get_layer_norm_max_min_tmp_size(c.dims, c.ts, c.flag),
            lambda c: tiling.get_layer_norm_nd_tiling_info(c.dims, c.stack, c.ts, c.flag),
        ),
        Api(
            "rms",
            "RmsNorm",
            "rmsnorm_tilingdata.h",
            "RmsNormTiling",
            tiling.RmsNormTiling,
            lambda c: tiling.get_rms_norm_max_min_tmp_size(c.dims, c.ts, c.flag),
            lambda c: tiling.get_rms_norm_tiling_info(c.dims, c.orig, c.stack, c.ts, c.flag),
        ),
    )
}


@dataclass
class Case:
    api: str
    id: str
    arch: int
    ts: int
    flag: bool  # isReuseSource; isBasicBlock for RmsNorm
    stack: int
    dims: tuple[int, ...]
    orig: tuple[int, ...] = ()
    note: str = ""  # why a failure case is in the list

    def line(self) -> str:
        parts = [self.api, self.id, self.arch, self.ts, int(self.flag), self.stack, len(self.dims), *self.dims]
        parts += [len(self.orig), *self.orig]
        return " ".join(str(p) for p in parts)

    def shape_key(self) -> str:
        return "x".join(map(str, self.dims)) + ("/" + "x".join(map(str, self.orig)) if self.orig else "")


# ------------------------------------------------------ CANN's field lists


def cann_fields(devkit: Path, header: str, struct_name: str) -> list[tuple[str, str]]:
    """(type, name) of each TILING_DATA_FIELD_DEF of `struct_name`, in order."""
    text = (devkit / "include/adv_api/normalization" / header).read_text()
    m = re.search(rf"BEGIN_TILING_DATA_DEF\(\s*{struct_name}\s*\)(.*?)END_TILING_DATA_DEF", text, re.S)
    if not m:
        raise SystemExit(f"compare: {struct_name} is not defined in {header}")
    fields = re.findall(r"TILING_DATA_FIELD_DEF\(\s*(\w+)\s*,\s*(\w+)\s*\)", m.group(1))
    if not fields:
        raise SystemExit(f"compare: no fields found for {struct_name} in {header}")
    return fields


def snake(name: str) -> str:
    """CANN's camelCase field name in jax_lngb's spelling: tmpTensorBSHPos -> tmp_tensor_bsh_pos."""
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.lower()


# --------------------------------------------------------------- the cases

# (B, S, H, original H): small and large H, H not a multiple of the 32-byte
# block for one or both types (24, 40, 20, 12, 200), padded rows.
LN_SHAPES = [
    (1, 1, 8, 8),
    (2, 16, 64, 64),
    (2, 16, 64, 60),
    (3, 7, 48, 41),
    (1, 1000, 16, 16),
    (4, 128, 768, 768),
    (2, 5, 1024, 1000),
    (1, 3, 4096, 4096),
    (5, 1, 24, 24),
    (1, 64, 40, 33),
    (8, 8, 8, 8),
    (2, 3, 2048, 2047),
    (16, 32, 128, 128),
    (3, 5, 20, 20),
    (2, 2, 12, 12),
    (1, 2, 200, 199),
]

# ((B, S, H), original H). For half H must be a multiple of 16, for float of
# 8; the shapes that break that (or the basic-block rule) are rejected by
# both sides and stay in the list as failure cases.
RMS_SHAPES = [
    ((1, 1, 16), 16),
    ((2, 16, 64), 64),
    ((2, 16, 64), 60),
    ((3, 7, 48), 41),
    ((1, 1000, 16), 16),
    ((4, 128, 768), 768),
    ((2, 5, 1024), 1000),
    ((1, 3, 4096), 4096),
    ((1, 600, 32), 32),
    ((8, 8, 64), 64),
    ((2, 4, 128), 100),
    ((1, 1024, 8), 8),
    ((16, 32, 256), 256),
    ((1, 64, 40), 33),
]


def buffer_sizes(mn: int, mx: int, h: int) -> list[int]:
    """The bounds, just around them, odd byte counts, between, and beyond the maximum."""
    sizes = {mn, mn + 1, mn + 3, mn + 4 * h - 1, (mn + mx) // 2, (mn + 3 * mx) // 4, mx - 1, mx, mx + 4096, 2 * mx}
    return sorted(s for s in sizes if mn <= s <= U32)


def make_cases() -> list[Case]:
    cases: list[Case] = []

    def add(api, arch, ts, flag, stack, dims, orig=(), note=""):
        cases.append(Case(api, f"{api}:{len(cases)}", arch, ts, flag, stack, tuple(dims), tuple(orig), note))

    # Buffers between the bounds, from jax_lngb's bounds (the comparison of
    # the bounds themselves tells whether they are CANN's).
    for api, archs in (("lngb", (2201,)), ("lng", (2201, 3510, 2002)), ("ln", (2201,))):
        a = APIS[api]
        for dims, ts, flag, arch in itertools.product(LN_SHAPES, (2, 4), (False, True), archs):
            probe = Case(api, "", arch, ts, flag, 0, dims)
            mx, mn = a.max_min(probe)
            for stack in buffer_sizes(mn, mx, dims[2]):
                add(api, arch, ts, flag, stack, dims)
    for (dims, oh), ts, basic in itertools.product(RMS_SHAPES, (2, 4), (False, True)):
        orig = (dims[0], dims[1], oh)
        try:
            mx, mn = tiling.get_rms_norm_max_min_tmp_size(dims, ts, basic)
        except ValueError:  # the basic-block rule: one case, rejected by both
            add("rms", 2201, ts, basic, 1 << 20, dims, orig, "basic-block shape rule")
            continue
        for stack in buffer_sizes(mn, mx, dims[2]):
            add("rms", 2201, ts, basic, stack, dims, orig)

    # Failure cases. (2, 16, 64): H = 64 fp32 slots a row.
    d4 = (2, 16, 64, 64)
    add("lngb", 2201, 4, False, 0, d4, note="no buffer")
    add("lngb", 2201, 4, False, 2 * 64 * 4 - 4, d4, note="below 2 rows of fp32")
    add("lngb", 2201, 2, False, 4 * 64 * 4 - 4, d4, note="half: accumulators fit, no whole row")
    add("lngb", 2201, 8, False, 1 << 16, d4, note="type size 8")
    add("lngb", 2201, 1, True, 1 << 16, d4, note="type size 1")
    add("lng", 2201, 4, False, 6 * 64 * 4 - 4, d4, note="no whole row for 6 buffers")
    add("lng", 2201, 2, False, 9 * 64 * 4 - 4, d4, note="no whole row for 9 buffers")
    add("lng", 2201, 4, False, 6 * 64 * 4, d4, note="one row, below the documented minimum")
    add("lng", 2201, 8, False, 1 << 20, d4, note="type size 8")
    add("lng", 3510, 8, False, 1 << 20, d4, note="type size 8 on dav-3510")
    add("ln", 2201, 4, False, 3 * 64 * 4 - 4, d4, note="float: no whole row for 3 buffers")
    add("ln", 2201, 4, True, 2 * 64 * 4 - 4, d4, note="float reuse: no whole row for 2 buffers")
    add("ln", 2201, 2, False, 512, d4, note="half: mean/variance fit, no whole row")
    add("ln", 2201, 4, False, 3 * 64 * 4, d4, note="float: one row, below the documented minimum")
    add("ln", 2201, 2, False, 100, d4, note="half: smaller than the fp32 mean and variance")
    add("ln", 2201, 8, False, 1 << 16, d4, note="type size 8")
    r3, o3 = (2, 16, 64), (2, 16, 64)
    add("rms", 2201, 2, False, (2 * 64 + 8) * 4 - 4, r3, o3, note="below the minimum")
    add("rms", 2201, 4, True, (64 + 8) * 4 - 1, r3, o3, note="below the minimum, basic block")
    add("rms", 2201, 2, False, 1 << 16, (2, 16, 24), (2, 16, 24), note="half row of 48 bytes")
    add("rms", 2201, 4, False, 1 << 16, (2, 16, 20), (2, 16, 20), note="float row of 80 bytes")
    add("rms", 2201, 4, False, 1 << 16, r3, (1, 16, 64), note="original B differs")
    add("rms", 2201, 4, False, 1 << 16, r3, (2, 8, 64), note="original S differs")
    add("rms", 2201, 4, False, 1 << 16, r3, (2, 16, 65), note="original H above H")
    add("rms", 2201, 4, True, 1 << 20, (1, 16, 96), (1, 16, 96), note="basic block: H = 96")
    add("rms", 2201, 4, True, 1 << 24, (1, 8, 2048), (1, 8, 2048), note="basic block: H = 2048")
    add("rms", 2201, 4, True, 1 << 20, (3, 5, 64), (3, 5, 64), note="basic block: B*S = 15")
    add("rms", 2201, 8, False, 1 << 16, r3, o3, note="type size 8")
    return cases


# ------------------------------------------------------------- comparison


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def show(value: int, ctype: str) -> str:
    if ctype == "float":
        return f"{struct.unpack('<f', struct.pack('<I', value))[0]!r} ({value:#010x})"
    return str(value)


@dataclass
class Tally:
    shapes: set = field(default_factory=set)
    cases: int = 0
    tilings_equal: int = 0
    max_min_equal: int = 0
    rejected_by_both: int = 0
    stricter: Counter = field(default_factory=Counter)  # tilings
    bounds_stricter: Counter = field(default_factory=Counter)
    mismatches: int = 0


def field_diffs(cfields: list[tuple[str, str]], a: Api, nd_ours: Any, words: list[int]) -> list[tuple[str, str, str]]:
    """(CANN field, jax_lngb value, CANN value) for every field that differs."""
    out = []
    for (ctype, cname), w, ours_name in zip(cfields, words, a.ours._FIELDS):
        v = getattr(nd_ours, ours_name)
        mine = f32_bits(v) if ctype == "float" else int(v)
        if mine != w:
            out.append((cname, show(mine, ctype), show(w, ctype)))
    return out


def self_check(fields: dict[str, list[tuple[str, str]]], agreed: dict[str, tuple[Any, list[int]]]) -> list[str]:
    """The comparison must see a one-bit change in any field: flip each in turn."""
    problems = []
    for k, a in APIS.items():
        if k not in agreed:
            problems.append(f"{a.name}: no tiling agreed, nothing to check the comparison with")
            continue
        nd_ours, words = agreed[k]
        for i, (_, cname) in enumerate(fields[k]):
            changed = list(words)
            changed[i] ^= 1
            if [d[0] for d in field_diffs(fields[k], a, nd_ours, changed)] != [cname]:
                problems.append(f"{a.name}: a change of {cname} is not reported as exactly that field")
    return problems


def ours(fn: Callable[[], Any]) -> tuple[Any, str | None]:
    try:
        return fn(), None
    except ValueError as e:
        return None, str(e)


def cann_rejected(part: dict, *, tiling_words: bool) -> str | None:
    """Why CANN's side counts as rejected, or None."""
    if part["ret"] is False:
        return "returned false"
    if part["errors"]:
        return "logged: " + part["errors"][0].split("] ", 2)[-1]
    if tiling_words and not any(part["words"]):
        return "left the tiling unset"
    return None


def stricter_reason(c: Case, cann: dict) -> str | None:
    """jax_lngb rejected what CANN accepted: a reason CANN's own output confirms."""
    if c.ts not in (2, 4):
        return "type size other than 2 or 4"
    mm = cann["max_min"]
    if cann_rejected(mm, tiling_words=False) is None and c.stack < mm["min"]:
        return "buffer below CANN's own minimum"
    return None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--driver", required=True, type=Path)
    p.add_argument("--devkit", required=True, type=Path)
    p.add_argument("--max-rows", type=int, default=40, help="mismatch rows to print")
    args = p.parse_args()

    ok = True
    fields: dict[str, list[tuple[str, str]]] = {}
    for a in APIS.values():
        fields[a.key] = cann_fields(args.devkit, a.header, a.struct)
        theirs = [snake(n) for _, n in fields[a.key]]
        if theirs != list(a.ours._FIELDS):
            ok = False
            print(f"{a.name}: FIELDS DIFFER\n  CANN:     {theirs}\n  jax_lngb: {list(a.ours._FIELDS)}")

    cases = make_cases()
    run = subprocess.run(
        [str(args.driver)], input="\n".join(c.line() for c in cases) + "\n", capture_output=True, text=True
    )
    if run.returncode != 0:
        print(f"compare: the driver failed (status {run.returncode}):\n{run.stderr[-4000:]}")
        return 1
    results = {r["id"]: r for r in map(json.loads, run.stdout.splitlines())}
    if len(results) != len(cases):
        print(f"compare: the driver answered {len(results)} of {len(cases)} cases")
        return 1

    tally = {k: Tally() for k in APIS}
    rows: list[tuple[str, str, str, str, str]] = []
    examples: dict[tuple[str, str], Case] = {}
    agreed: dict[str, tuple[Any, list[int]]] = {}  # one equal tiling per API, for the self-check
    for c in cases:
        a, t, cann = APIS[c.api], tally[c.api], results[c.id]
        t.cases += 1
        where = f"{c.id} {a.name} dav-{c.arch} ts={c.ts} flag={int(c.flag)} stack={c.stack} {c.shape_key()}"

        # The bounds.
        mm_ours, mm_err = ours(lambda: a.max_min(c))
        mm_rej = cann_rejected(cann["max_min"], tiling_words=False)
        if mm_ours is not None and mm_rej is None:
            theirs = (cann["max_min"]["max"], cann["max_min"]["min"])
            if tuple(mm_ours) == theirs:
                t.max_min_equal += 1
            else:
                rows.append((where, "(max, min)", str(tuple(mm_ours)), str(theirs), ""))
                t.mismatches += 1
        elif mm_ours is not None or mm_rej is None:
            if mm_ours is None and c.ts not in (2, 4):
                t.bounds_stricter["type size other than 2 or 4"] += 1
            else:
                rows.append((where, "max/min", mm_err or "accepted", mm_rej or "accepted", ""))
                t.mismatches += 1

        # The tiling.
        nd_ours, nd_err = ours(lambda: a.nd(c))
        nd_rej = cann_rejected(cann["tiling"], tiling_words=True)
        if nd_ours is not None and nd_rej is None:
            words = cann["tiling"]["words"]
            if len(words) != len(fields[c.api]):
                rows.append((where, "struct size", str(len(fields[c.api])), str(len(words)), "words"))
                t.mismatches += 1
                continue
            diffs = field_diffs(fields[c.api], a, nd_ours, words)
            if diffs:
                rows += [(where, *d, "") for d in diffs]
                t.mismatches += 1
            else:
                t.tilings_equal += 1
                t.shapes.add(c.shape_key())
                agreed.setdefault(c.api, (nd_ours, words))
        elif nd_ours is None and nd_rej is not None:
            t.rejected_by_both += 1
        elif nd_ours is None and (reason := stricter_reason(c, cann)):
            t.stricter[reason] += 1
            examples.setdefault((c.api, reason), c)
        else:
            rows.append((where, "tiling", nd_err or "accepted", nd_rej or "accepted", c.note))
            t.mismatches += 1

    print(
        f"{'API':<18} {'shapes':>6} {'cases':>6} {'tilings =':>9} {'bounds =':>8} {'both reject':>11} "
        f"{'stricter':>8} {'mismatch':>8}  fields"
    )
    for k, a in APIS.items():
        t = tally[k]
        print(
            f"{a.name:<18} {len(t.shapes):>6} {t.cases:>6} {t.tilings_equal:>9} {t.max_min_equal:>8} "
            f"{t.rejected_by_both:>11} {sum(t.stricter.values()):>8} {t.mismatches:>8}  {len(fields[k])}"
        )
    for k, a in APIS.items():
        for reason, n in sorted(tally[k].stricter.items()):
            ex = examples.get((k, reason))
            at = f" (e.g. {ex.shape_key()} ts={ex.ts} stack={ex.stack}: {ex.note})" if ex and ex.note else ""
            print(f"  {a.name} tiling: jax_lngb rejects, CANN accepts: {reason}: {n}{at}")
        for reason, n in sorted(tally[k].bounds_stricter.items()):
            print(f"  {a.name} bounds: jax_lngb rejects, CANN accepts: {reason}: {n}")
    if rows:
        ok = False
        print(f"\nMISMATCHES ({len(rows)} rows):")
        print(f"  {'case':<70} {'field':<24} {'jax_lngb':<30} CANN")
        for where, name, mine, theirs, note in rows[: args.max_rows]:
            print(f"  {where:<70} {name:<24} {mine:<30} {theirs} {note}")
        if len(rows) > args.max_rows:
            print(f"  ... and {len(rows) - args.max_rows} more")

    problems = self_check(fields, agreed)
    if problems:
        ok = False
        print("SELF-CHECK FAILED: " + "; ".join(problems))
    else:
        n = sum(len(f) for f in fields.values())
        print(f"self-check: a one-bit change in any of the {n} fields of the {len(APIS)} structs is reported")

    summary = {
        "ok": ok,
        "apis": {
            a.name: {
                "shapes": len(tally[k].shapes),
                "cases": tally[k].cases,
                "tilings_equal": tally[k].tilings_equal,
                "bounds_equal": tally[k].max_min_equal,
                "rejected_by_both": tally[k].rejected_by_both,
                "stricter": sum(tally[k].stricter.values()),
                "mismatches": tally[k].mismatches,
                "fields": len(fields[k]),
            }
            for k, a in APIS.items()
        },
    }
    print("SUMMARY " + json.dumps(summary, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
