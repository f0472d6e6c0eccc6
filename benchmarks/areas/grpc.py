"""Predict through grpcio (the CLI's and tools' path) under open-loop load.

    python -m benchmarks run grpc [--rates 500 1000] [--seconds 10] [--daemon-env KEY=VALUE ...]

Same daemon, models and requests as the ``hook`` area; Predict calls on one ``grpc.aio``
channel to the public Unix socket, due at fixed rates (benchmarks/load/openloop.py). Each
rate runs ``--repeats`` times, rates interleaved; the median of its phases is reported.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks.load.world import KTH
from benchmarks.load.openloop import median_row, run_rate, start_daemon, stop_daemon
from benchmarks.load.world import build_world, requests

DESCRIPTION = "gRPC Predict through grpcio, open loop: p50/p99 at 500 req/s"


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run grpc")
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3, help="phases per rate, interleaved (median reported)")
    parser.add_argument("--trace", type=Path, default=KTH)
    parser.add_argument("--daemon-env", nargs="*", default=[], metavar="KEY=VALUE")
    options = parser.parse_args(args)
    env = dict(item.split("=", 1) for item in options.daemon_env)
    data_dir = Path(tempfile.mkdtemp(prefix="hpd-bench-grpc-"))
    proc = None
    rows = []
    try:
        world = build_world(data_dir, trace=options.trace, learner=None)
        proc, info = start_daemon(data_dir, {"HPCPREDICT_DAEMON_HOOK_SOCKET": "", **env})
        run_rate("grpc", info["socket"], requests(world, 400, seed=0), 200.0, 2.0, info["pid"])   # warm-up
        for _ in range(options.repeats):
            for rate in options.rates:
                payloads = requests(world, int(rate * options.seconds), seed=len(rows) + 1)   # fresh scripts
                row = run_rate("grpc", info["socket"], payloads, rate, options.seconds, info["pid"])
                print(row, flush=True)
                rows.append(row)
    finally:
        if proc is not None:
            stop_daemon(proc)
        shutil.rmtree(data_dir, ignore_errors=True)
    rates = [median_row([r for r in rows if r["rate"] == rate]) for rate in options.rates]
    at_500 = next((r for r in rates if r["rate"] == 500.0), None)
    return {"goal": None if at_500 is None else {"rate": 500.0, "p50_ms": at_500["p50_ms"], "p99_ms": at_500["p99_ms"],
                                                 "p99_from_send_ms": at_500["p99_from_send_ms"],
                                                 "p99_goal_ms": 5.0, "met": at_500["p99_ms"] <= 5.0},
            "rates": rates,
            "phases": rows,
            "world": {"trace": options.trace.name, "history_jobs": world["history_jobs"],
                      "walltime_model": world["walltime"], "runtime_model": world["runtime"]},
            "daemon_env": env}
