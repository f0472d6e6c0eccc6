"""What one hostile batch script costs the daemon's script reader, before/after the parse budget.

    .venv/bin/python -m benchmarks run hostile_scripts [--before f675920] [--copies 20]

The scripts of tests/robustness/hostile_scripts.py (64 KiB, the Slurm hook's cut) and a plain
one, each as ``--copies`` distinct copies (the parse cache is keyed by digest), through
``job_spec_from_request`` — the validation the daemon runs for every Predict, the Slurm
hook's inside slurmctld's job write lock — in a fresh interpreter whose ``hpcpredict`` package
is the commit's (``git archive``) or this checkout's. Median and maximum ms per script.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.reliability.target import source_of

DESCRIPTION = "ms per hostile 64 KiB batch script in the daemon's request validation, before/after the parse budget"

REPO = Path(__file__).resolve().parents[2]

_MEASURE = """
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from tests.robustness.hostile_scripts import HOSTILE_SCRIPTS, PLAIN_SCRIPT, variant
from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.jobspec import job_spec_from_request
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
limits = load_config(None, environ={"HPCPREDICT_DATA_DIR": "/nonexistent", "HPCPREDICT_CONFIG_PATH": ""}).request_bounds
copies = int(sys.argv[2])
out = {}
for name, script in {"plain": PLAIN_SCRIPT, **HOSTILE_SCRIPTS}.items():
    times, flagged = [], False
    for index in range(copies):
        request = pb.JobRequest(job=pb.JobIdentity(user="alice"), resources=pb.Resources(nodes=2, ntasks=8),
                                time_limit_s=3600, script=variant(script, index), environment={"A": "1"})
        start = time.perf_counter()
        spec = job_spec_from_request(request, limits)
        times.append((time.perf_counter() - start) * 1000)
        flagged = any("too costly" in w for w in spec.warnings)
    out[name] = {"bytes": len(script), "median_ms": round(statistics.median(times), 2),
                 "max_ms": round(max(times), 2), "flagged": flagged}
print(json.dumps(out))
"""


def measure(source: Path | None, copies: int) -> dict:
    env = dict(os.environ, HPCPREDICT_CONFIG_PATH="")
    if source is not None:
        env["PYTHONPATH"] = f"{source}:{env.get('PYTHONPATH', '')}"
    result = subprocess.run([sys.executable, "-c", _MEASURE, str(REPO), str(copies)], env=env, cwd="/tmp",
                            capture_output=True, text=True, timeout=600, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run hostile_scripts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="f675920", help="commit for the 'before' column ('' = skip)")
    parser.add_argument("--copies", type=int, default=20, help="distinct copies of each script")
    options = parser.parse_args(args)
    table = {}
    if options.before:
        source = source_of(options.before)
        try:
            table["before"] = measure(source, options.copies)
        finally:
            shutil.rmtree(source, ignore_errors=True)
    table["after"] = measure(None, options.copies)
    worst = {column: max(v["median_ms"] for k, v in rows.items() if k != "plain") for column, rows in table.items()}
    return {"before_commit": options.before, "copies": options.copies, "scripts": table,
            "headline": {"worst_hostile_median_ms": worst, "plain_median_ms":
                         {column: rows["plain"]["median_ms"] for column, rows in table.items()}}}
