"""The long fuzz run: >= 10^5 generated inputs over every input parser, crashes and hangs counted.

Run through the benchmark runner: ``python -m benchmarks run fuzz [--full]`` (benchmarks/areas/fuzz.py).

Same targets and property as ``tests/fuzz`` (:mod:`tests.fuzz.targets`), but every example is
run to the end and counted instead of stopping at the first failure: ``ok`` (a value),
``rejected`` (one of our errors, with a message naming the field/line), ``crash`` (any other
exception or a broken property) and ``hang`` (an example that used more than ``--hang-s`` of
CPU, cut by SIGPROF, or ``--wall-s`` of wall time, cut by SIGALRM). The slowest example is
reported in CPU time: on a shared machine wall time measures the neighbours. Shrinking is off
(a crash is recorded with its input as generated).
"""
from __future__ import annotations

import json
import logging
import signal
import sys
import time

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


def fuzz_all(per_target: int, hang_s: float = 10.0, wall_s: float = 120.0, only: list[str] | None = None,
             seed: int = 0) -> list[dict]:
    """Every target (or those named in ``only``), ``per_target`` examples each; one row per target."""
    previous = signal.signal(signal.SIGALRM, _alarm), signal.signal(signal.SIGPROF, _alarm)
    logging.disable(logging.WARNING)  # parsers log what they skip; millions of lines say nothing here
    rows = []
    try:
        for target in all_targets():
            if only and target.name not in only:
                continue
            row = fuzz_target(target, per_target, hang_s, wall_s, seed)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "failures"}), file=sys.stderr, flush=True)
            for failure in row["failures"][:3]:
                print("   ", json.dumps(failure), file=sys.stderr, flush=True)
    finally:
        logging.disable(logging.NOTSET)
        signal.signal(signal.SIGALRM, previous[0])
        signal.signal(signal.SIGPROF, previous[1])
    return rows
