"""Fuzzing of every input parser and of request validation: crashes and hangs counted.

    python -m benchmarks run fuzz            # 1,000 generated inputs per target (19 targets)
    python -m benchmarks run fuzz --full     # 6,000 per target (114,000 cases)

Hypothesis, generation phase only, every example run to the end (benchmarks/fuzz/run_fuzz.py):
``ok`` (a value), ``rejected`` (our one-line error naming the field or source:line), ``crash``
(anything else) and ``hang`` (more than ``--hang-s`` of CPU or ``--wall-s`` of wall time). The
goal is 0 crashes and 0 hangs; the slowest example is reported in CPU time, since wall time on
a shared machine measures the neighbours.
"""
from __future__ import annotations

import argparse

from benchmarks.fuzz.run_fuzz import fuzz_all

DESCRIPTION = "fuzz the input parsers and request validation: cases, crashes, hangs (--full: 114,000 cases)"


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-target", type=int, default=1000, help="generated inputs per target (default 1000)")
    parser.add_argument("--full", action="store_true", help="6,000 inputs per target")
    parser.add_argument("--hang-s", type=float, default=10.0, help="CPU seconds per example before it is a hang")
    parser.add_argument("--wall-s", type=float, default=120.0, help="wall seconds per example before it is a hang")
    parser.add_argument("--only", nargs="*", help="target names (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(args)
    per_target = 6000 if options.full else options.per_target
    rows = fuzz_all(per_target, options.hang_s, options.wall_s, options.only, options.seed)
    total = {k: sum(r[k] for r in rows) for k in ("cases", "ok", "rejected", "crash", "hang")}
    return {"headline": {"targets": len(rows), "cases": total["cases"], "crashes": total["crash"],
                         "hangs": total["hang"],
                         "slowest_cpu_ms": max((r["slowest_cpu_ms"] for r in rows), default=0.0)},
            "per_target": per_target, "hang_cpu_s": options.hang_s, "hang_wall_s": options.wall_s,
            "seed": options.seed, "total": total, "targets": rows}
