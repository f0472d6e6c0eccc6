"""The long fuzz run: >= 10^5 generated inputs over every input parser, crashes and hangs counted.

    nice -n 10 .venv/bin/python -m benchmarks.fuzz.run_fuzz --per-target 6000 \\
        --json benchmarks/fuzz/results.json

Same targets and property as ``tests/fuzz`` (:mod:`tests.fuzz.targets`), but every example is
run to the end and counted instead of stopping at the first failure: ``ok`` (a value),
``rejected`` (one of our errors, with a message naming the field/line), ``crash`` (any other
exception or a broken property) and ``hang`` (an example that used more than ``--hang-s`` of
CPU, cut by SIGPROF, or ``--wall-s`` of wall time, cut by SIGALRM). The slowest example is
reported in CPU time: on a shared machine wall time measures the neighbours. Shrinking is off
(a crash is recorded with its input as generated).
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from tests.fuzz.targets import all_targets, exercise


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def fuzz_target(target, examples: int, hang_s: float, wall_s: float, seed: int) -> dict:
    counts = {"ok": 0, "rejected": 0, "crash": 0, "hang": 0}
    slowest = 0.0
    failures: list[dict] = []

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def run(example):
        nonlocal slowest
        start = time.process_time()
        signal.setitimer(signal.ITIMER_PROF, hang_s)
        signal.setitimer(signal.ITIMER_REAL, wall_s)
        try:
            counts[exercise(target, example)] += 1
        except Hang:
            counts["hang"] += 1
            failures.append({"kind": "hang", "input": repr(example)[:300]})
        except Exception as error:  # noqa: BLE001 - counting crashes is the point
            counts["crash"] += 1
            if len(failures) < 20:
                failures.append({"kind": "crash", "error": f"{type(error).__name__}: {error}"[:300],
                                 "input": repr(example)[:300]})
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.setitimer(signal.ITIMER_REAL, 0)
        slowest = max(slowest, time.process_time() - start)

    began = time.perf_counter()
    hypothesis_seed(seed)(run)()
    return {"target": target.name, "cases": sum(counts.values()), **counts,
            "seconds": round(time.perf_counter() - began, 1), "slowest_cpu_ms": round(slowest * 1e3, 1),
            "failures": failures}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-target", type=int, default=6000)
    parser.add_argument("--hang-s", type=float, default=10.0, help="CPU seconds per example before it is a hang")
    parser.add_argument("--wall-s", type=float, default=120.0, help="wall seconds per example before it is a hang")
    parser.add_argument("--only", nargs="*", help="target names (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGPROF, _alarm)
    logging.disable(logging.WARNING)  # parsers log what they skip; millions of lines say nothing here
    rows = []
    for target in all_targets():
        if args.only and target.name not in args.only:
            continue
        row = fuzz_target(target, args.per_target, args.hang_s, args.wall_s, args.seed)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "failures"}), flush=True)
        for failure in row["failures"][:3]:
            print("   ", json.dumps(failure), flush=True)
        if args.json:  # after every target: a long run that is stopped keeps what it measured
            args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                             "per_target": args.per_target, "hang_cpu_s": args.hang_s,
                                             "hang_wall_s": args.wall_s, "seed": args.seed,
                                             "total_cases": sum(r["cases"] for r in rows), "targets": rows},
                                            indent=1))
    total = {k: sum(r[k] for r in rows) for k in ("cases", "ok", "rejected", "crash", "hang")}
    print(json.dumps({"total": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
