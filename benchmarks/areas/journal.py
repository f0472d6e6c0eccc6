"""Does the prediction journal pay on the hook path? The same daemon with and without it.

    python -m benchmarks run journal [--rates 500 1000] [--rounds 3] [--seconds 8]

Two ``hpcpredictd`` processes on copies of one data directory (benchmarks/load/world.py:
KTH-SP2 history, its walltime model, the bundled models): ``[store] journal_mib = 8`` (each
prediction copied into a memory-mapped journal, committed to SQLite in batches by a thread)
and ``journal_mib = 0`` (one SQLite transaction per prediction, WAL, no fsync). Both run the
whole time; open-loop hook-socket phases alternate between them, round after round, so load
from the rest of the machine falls on both alike.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from benchmarks.areas.hook import KTH
from benchmarks.load.openloop import hook_lines, run_rate, start_daemon, stop_daemon
from benchmarks.load.world import build_world, requests

SETTINGS = {"journal": "8", "sqlite": "0"}


DESCRIPTION = "prediction journal vs one SQLite transaction per prediction, hook socket, interleaved A/B"


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run journal")
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="hpd-journal-ab-"))
    procs = {}
    rows = []
    try:
        world = build_world(base / "world", trace=KTH, learner=None)
        warm_up = hook_lines(requests(world, 400, seed=0))
        infos = {}
        for name, mib in SETTINGS.items():
            shutil.copytree(base / "world", base / name)
            procs[name], infos[name] = start_daemon(base / name, {"HPCPREDICT_STORE_JOURNAL_MIB": mib})
            run_rate("hook", infos[name]["hook_socket"], warm_up, 200.0, 2.0, infos[name]["pid"])
        for round_ in range(args.rounds):
            for rate in args.rates:
                # the same fresh scripts for both settings in this round (no parse cache answers)
                lines = hook_lines(requests(world, int(rate * args.seconds), seed=1 + round_ * 10_000 + int(rate)))
                order = list(SETTINGS) if round_ % 2 == 0 else list(reversed(SETTINGS))
                for name in order:
                    row = run_rate("hook", infos[name]["hook_socket"], lines, rate, args.seconds, infos[name]["pid"])
                    row.update(setting=name, round=round_)
                    print(json.dumps({k: row[k] for k in ("setting", "round", "rate", "p50_ms", "p99_ms", "p99_from_send_ms",
                                                           "daemon_cpu_us_per_call", "other_cores", "codes")}),
                          flush=True)
                    rows.append(row)
    finally:
        for proc in procs.values():
            stop_daemon(proc)
        shutil.rmtree(base, ignore_errors=True)
    summary = {}
    for name in SETTINGS:
        for rate in args.rates:
            mine = [r for r in rows if r["setting"] == name and r["rate"] == rate]
            summary[f"{name}@{rate:g}"] = {
                "p50_ms_median": statistics.median(r["p50_ms"] for r in mine),
                "p99_ms_median": statistics.median(r["p99_ms"] for r in mine),
                "p99_from_send_ms_median": statistics.median(r["p99_from_send_ms"] for r in mine),
                "daemon_cpu_us_per_call_median": statistics.median(r["daemon_cpu_us_per_call"] for r in mine),
                "not_ok": sum(sum(v for k, v in r["codes"].items() if k != "OK") for r in mine),
                "other_cores_mean": statistics.mean(r["other_cores"] for r in mine)}
    return {"summary": summary, "rows": rows}
