"""What an ordinary user's job fields and Predict calls do to another user, before and after.

    sudo .venv/bin/python -m benchmarks run hostile_fields [--before b8c431a] [--jobs 21]

* ``job_name``: on the real Slurm 22.05 test cluster (``tests/slurm/test_hostile_job_fields.py``
  with ``--jobs`` one-second jobs of alice named ``x AdminComment={hpcpredict=<bob's id>} ...``):
  alice's outcome rows stored in bob's name or linked to bob's prediction, bob's suggested limit
  before/after. The hooks and the daemon are the commit's (its code first on ``PYTHONPATH``).
* ``job_id``: a fresh ``hpcpredictd``; an ordinary user (``nobody``) Predicts with bob's job id
  and her inputs; then, as the hooks do when bob's AdminComment lost our field, his runtime
  features and his outcome arrive without a prediction id: which prediction his outcome links
  (whose), and whether her inputs are in his training row.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.reliability.target import Target, source_of
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

DESCRIPTION = "an ordinary user's hostile job name / job id against another user's history, before/after"

REPO = Path(__file__).resolve().parents[2]

_AS_NOBODY = """
import json, socket, sys
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(sys.argv[1])
conn.sendall(json.dumps({"method": "Predict", "request": json.loads(sys.argv[2])}).encode() + b"\\n")
data = b""
while not data.endswith(b"\\n"):
    chunk = conn.recv(65536)
    if not chunk:
        break
    data += chunk
print(data.decode())
"""


def job_name(source: Path | None, jobs: int) -> dict:
    with tempfile.TemporaryDirectory() as work:
        measured = Path(work) / "measured.json"
        env = dict(os.environ, HPCPREDICT_HOSTILE_JOBS=str(jobs), HPCPREDICT_HOSTILE_MEASURE=str(measured))
        if source is not None:
            env["PYTHONPATH"] = f"{source}:{env.get('PYTHONPATH', '')}".rstrip(":")
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               str(REPO / "tests" / "slurm" / "test_hostile_job_fields.py")
                               + "::test_a_job_named_after_bobs_prediction_stays_alices"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
        result = json.loads(measured.read_text()) if measured.exists() else {}
    return {**result, "test_passed": done.returncode == 0,
            "pytest_tail": done.stdout.strip().splitlines()[-1:] if done.stdout else []}


def job_id(source: Path | None) -> dict:
    target = Target(source).start()
    try:
        bob = pb.JobRequest(job=pb.JobIdentity(user="bob", application="lmp"), resources=pb.Resources(nodes=2),
                            time_limit_s=3600, job_id="202")
        bobs = target.stub.PredictAtAllocation(pb.AllocationRequest(request=bob, node_list="n[01-02]", job_id="202"),
                                               timeout=30)
        hers = {"job": {"user": "nobody", "application": "lmp"}, "time_limit_s": 60, "job_id": "202",
                "inputs": {"size": {"number": 999}}}
        reply = subprocess.run([sys.executable, "-c", _AS_NOBODY, target.info["hook_socket"], json.dumps(hers)],
                               user=65534, group=65534, extra_groups=[], capture_output=True, text=True, timeout=60)
        her_id = json.loads(reply.stdout)["response"]["prediction_id"]
        target.stub.ReportRuntimeFeatures(pb.RuntimeFeatures(job_id="202", text="HPCPREDICT t=5 steps=10\n"), timeout=30)
        target.stub.ReportOutcome(pb.Outcome(job_id="202", state="COMPLETED", elapsed_s=1700, start_time=1_700_000_000,
                                             end_time=1_700_001_700, request=bob), timeout=30)
        time.sleep(2)   # the daemon commits its prediction journal in batches
        db = sqlite3.connect(str(target.data_dir / "hpcpredict.sqlite"))
        try:
            linked, inputs = db.execute("SELECT prediction_id, inputs FROM jobs WHERE job_id = '202' "
                                        "AND source = 'outcome'").fetchone()
            owner = db.execute("SELECT user FROM predictions WHERE prediction_id = ?", (linked,)).fetchone()
        finally:
            db.close()
        return {"bobs_outcome_linked_to": f"a prediction of {owner[0]}" if owner else "none",
                "linked_is_her_predict": linked == her_id, "linked_is_bobs_allocation": linked == bobs.prediction_id,
                "her_inputs_in_bobs_row": "999" in inputs}
    finally:
        target.cleanup()


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run hostile_fields", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="b8c431a", help="commit for the 'before' column ('' = skip)")
    parser.add_argument("--jobs", type=int, default=21, help="alice's hostile jobs on the cluster")
    options = parser.parse_args(args)
    if os.geteuid() != 0:
        raise SystemExit("benchmarks run hostile_fields: run as root (starts Slurm, runs as other users)")
    sources = {"before": source_of(options.before)} if options.before else {}
    sources["after"] = None
    table: dict = {"job_name": {}, "job_id": {}}
    try:
        for column, source in sources.items():
            table["job_id"][column] = job_id(source)
            table["job_name"][column] = job_name(source, options.jobs)
            print(json.dumps({column: {name: table[name][column] for name in table}})[:800], flush=True)
    finally:
        if sources.get("before") is not None:
            shutil.rmtree(sources["before"], ignore_errors=True)
    after = table["job_name"]["after"]
    return {"before_commit": options.before, "attacks": table,
            "headline": {"bob_limit_after_attack_s": after.get("bob_limit_after_s"),
                         "bob_limit_before_attack_s": after.get("bob_limit_before_s"),
                         "rows_in_bobs_name": after.get("outcome_rows_in_bobs_name")}}
