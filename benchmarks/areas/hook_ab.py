"""The local (hook) socket of this tree against an earlier revision's, interleaved A/B.

    python -m benchmarks run hook_ab [--baseline REV] [--rates 500 1000] [--rounds 3] [--seconds 8]

Two ``hpcpredictd`` processes on copies of one data directory (benchmarks/load/world.py:
KTH-SP2 history, its walltime model, the bundled models): ``current`` runs this tree,
``baseline`` the package as it was at ``REV`` (``git archive``, put first on PYTHONPATH).
Both run the whole time; open-loop hook-socket phases alternate between them, round after
round, so load from the rest of the machine falls on both alike. Latency counts from each
request's due time, as in the ``hook`` area.
"""
from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path

from benchmarks.areas.hook import KTH
from benchmarks.load.openloop import hook_lines, run_rate, start_daemon, stop_daemon
from benchmarks.load.world import REPO, build_world, requests

DESCRIPTION = "local (hook) socket of this tree vs an earlier revision, open loop, interleaved A/B"
#: the last revision with the thread-per-connection hook socket
BASELINE = "a4d2d4d"


def export(revision: str, into: Path) -> Path:
    """The package tree at ``revision`` as ``into/hpcpredict`` (compiled protobuf modules included)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", revision], check=True,
                             capture_output=True).stdout
    package = into / "hpcpredict"
    package.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(package)   # our own repository's archive
    return into


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run hook_ab")
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="hpd-hook-ab-"))
    settings = {"current": {}, "baseline": {"PYTHONPATH": str(export(args.baseline, base / "baseline-src"))}}
    procs, infos, rows = {}, {}, []
    try:
        world = build_world(base / "world", trace=KTH, learner=None)
        warm_up = hook_lines(requests(world, 400, seed=0))
        for name, env in settings.items():
            shutil.copytree(base / "world", base / name)
            procs[name], infos[name] = start_daemon(base / name, env)
            run_rate("hook", infos[name]["hook_socket"], warm_up, 200.0, 2.0, infos[name]["pid"])
        for round_ in range(args.rounds):
            for rate in args.rates:
                lines = hook_lines(requests(world, int(rate * args.seconds), seed=1 + round_ * 10_000 + int(rate)))
                order = list(settings) if round_ % 2 == 0 else list(reversed(settings))
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
    for name in settings:
        for rate in args.rates:
            mine = [r for r in rows if r["setting"] == name and r["rate"] == rate]
            summary[f"{name}@{rate:g}"] = {
                "p50_ms_median": statistics.median(r["p50_ms"] for r in mine),
                "p99_ms_median": statistics.median(r["p99_ms"] for r in mine),
                "p99_from_send_ms_median": statistics.median(r["p99_from_send_ms"] for r in mine),
                "daemon_cpu_us_per_call_median": statistics.median(r["daemon_cpu_us_per_call"] for r in mine),
                "not_ok": sum(sum(v for k, v in r["codes"].items() if k != "OK") for r in mine),
                "other_cores_mean": statistics.mean(r["other_cores"] for r in mine)}
    return {"baseline": args.baseline, "summary": summary, "rows": rows}
