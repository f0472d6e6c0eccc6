"""The hook socket under open-loop load: what slurmctld's job_submit hook meets.

    python -m benchmarks run hook [--rates 250 500 1000 ...] [--seconds 10] [--daemon-env KEY=VALUE ...]

The real daemon (``hpcpredictd`` subprocess, default config: not pinned, both cores) with the
bundled models and a walltime model trained on KTH-SP2 (benchmarks/load/world.py). Requests
arrive at fixed rates, one connection each (benchmarks/load/openloop.py); latency counts from
each request's due time to its reply. First the goal rate (500/s), ``--repeats`` times, then
rising rates (``--repeats`` times each) until the median p99 passes 10 ms;
``p99_crosses_10ms_at`` interpolates between the two rates around it. On a shared machine
one phase can fall into another process's burst, so each rate reports the median of its
repeats and every phase is kept in ``rows``.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks.load.openloop import crossing_rate, hook_lines, median_row, run_rate, start_daemon, stop_daemon
from benchmarks.load.world import KTH, build_world, requests

DESCRIPTION = "hook socket, open loop: p50/p99 at 500 req/s and the rate where p99 crosses 10 ms"


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run hook")
    parser.add_argument("--goal-rate", type=float, default=500.0)
    parser.add_argument("--rates", type=float, nargs="+", default=[250, 750, 1000, 1250, 1500, 2000, 2500, 3000])
    parser.add_argument("--seconds", type=float, default=10.0, help="per rate")
    parser.add_argument("--repeats", type=int, default=3, help="phases per rate (median reported)")
    parser.add_argument("--limit-ms", type=float, default=10.0, help="stop rising once p99 passes this")
    parser.add_argument("--trace", type=Path, default=KTH)
    parser.add_argument("--daemon-env", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides, e.g. HPCPREDICT_STORE_JOURNAL_MIB=0")
    options = parser.parse_args(args)
    env = dict(item.split("=", 1) for item in options.daemon_env)
    data_dir = Path(tempfile.mkdtemp(prefix="hpd-bench-hook-"))
    proc = None
    try:
        world = build_world(data_dir, trace=options.trace, learner=None)
        proc, info = start_daemon(data_dir, env)
        socket_path, pid = info["hook_socket"], info["pid"]
        run_rate("hook", socket_path, hook_lines(requests(world, 400, seed=0)), 200.0, 2.0, pid)   # warm-up
        phases: list[dict] = []

        def phase(rate: float) -> dict:
            # fresh scripts for every phase (seeded by its number): no parse cache answers for the parser
            lines = hook_lines(requests(world, int(rate * options.seconds), seed=len(phases) + 1))
            row = run_rate("hook", socket_path, lines, rate, options.seconds, pid)
            phases.append(row)
            return row

        def measure(rate: float) -> dict:
            mine = [phase(rate) for _ in range(options.repeats)]
            phases.extend(mine)
            row = median_row(mine)
            print(row, flush=True)
            return row
        goal = measure(options.goal_rate)
        rows = [goal]
        for rate in sorted(options.rates):
            row = measure(rate)
            rows.append(row)
            if row["p99_ms"] > options.limit_ms or row["codes"].get("OK", 0) < 0.99 * row["requests"]:
                break
        crossing = crossing_rate(rows, options.limit_ms)
    finally:
        if proc is not None:
            stop_daemon(proc)
        shutil.rmtree(data_dir, ignore_errors=True)
    return {"goal": {"rate": options.goal_rate, "p50_ms": goal["p50_ms"], "p99_ms": goal["p99_ms"],
                     "p99_from_send_ms": goal["p99_from_send_ms"], "p99_goal_ms": 2.0, "met": goal["p99_ms"] <= 2.0},
            f"p99_crosses_{options.limit_ms:g}ms_at": crossing,
            "rates": sorted(rows, key=lambda r: r["rate"]),
            "phases": phases,
            "world": {"trace": options.trace.name, "history_jobs": world["history_jobs"],
                      "walltime_model": world["walltime"], "runtime_model": world["runtime"]},
            "daemon_env": env}
