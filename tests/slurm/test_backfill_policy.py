"""The walltime policy on a real Slurm 22.05 controller with sched/backfill (see conftest.py):
what backfill does with the limits job_submit.lua sets, a partition whose MaxTime is below the
hook's floor, absurd daemon replies, and AdminComment shared with a site tool.

This file runs before test_cluster_hooks.py (same session cluster) while the queue is empty.
"""
from __future__ import annotations

import base64
import json
import math
import re
import sqlite3
import subprocess
import time

import pytest

from hpcpredict.slurm_plugin import slurmjob

from .harness import FakeHookServer, poll

# The history of BF_SCRIPT says 20-240 s: the walltime model trained on the session's past
# (conftest.walltime_model) estimates 25 s and bounds it below 200 s at the test daemon's risk,
# so its --time-min is the 5-minute floor; the job itself runs 200 s: within its --time-min, far
# above its point estimate, and longer than any limit backfill could give it before the
# blocker's 3 minutes are up (Slurm enforces a limit within about 30 s).
BF_RUNTIMES = [240.0, 20.0, 25.0, 20.0, 30.0]
BF_SLEEP = 200
BF_SCRIPT = f"#!/bin/bash\n#SBATCH -J bf\nsleep {BF_SLEEP}\n"


def seed(daemon, user: str, job_name: str, script: str, runtimes: list[float], partition: str = "debug",
         nodes: int = 1) -> None:
    """Earlier runs of the same job, reported the way the epilog reports them."""
    now = int(time.time())
    for index, runtime in enumerate(runtimes):
        request = {"job": {"user": user, "job_name": job_name, "account": "research", "partition": partition},
                   "resources": {"nodes": nodes}, "time_limit_s": 600,
                   "script": base64.b64encode(script.encode()).decode()}
        ack = daemon.call("ReportOutcome", {"job_id": f"seed-{user}-{job_name}-{index}", "state": "COMPLETED",
                                            "start_time": now - 7200 + index * 600,
                                            "end_time": now - 7200 + index * 600 + int(runtime),
                                            "elapsed_s": runtime, "request": request})
        assert ack["stored"] is True


def prediction_row(daemon, prediction_id: str):
    from hpcpredict.daemon.store import SQLiteStore

    def read():
        db = SQLiteStore(str(daemon.data_dir / "hpcpredict.sqlite"))
        try:
            return db.prediction(prediction_id)
        finally:
            db.close()
    return poll(read, 10, f"prediction {prediction_id} in the store", 0.05)


def submit_id(stderr: str) -> str:
    line = next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))
    return re.search(r"\[([0-9a-f]{32})\]$", line).group(1)


def squeue_empty(cluster) -> bool:
    return subprocess.run(["squeue", "-h"], env=cluster.env(), capture_output=True, text=True,
                          timeout=10).stdout.strip() == ""


def final(cluster, job_id: str) -> dict:
    cluster.wait_done(job_id, timeout=400)
    return cluster.job(job_id)


def test_backfill_never_lowers_a_limit_below_the_bound(cluster, daemon, walltime_model):
    """A blocker holds 4 of 8 nodes for up to 3 min; a head job waits for all 8 nodes; then
    four small jobs with --time=10 whose history gives a small point estimate (25 s); the site's
    walltime model knows them (bound mode sets a kill limit only from it), and their --time-min
    is its bound, at least the 5-minute floor. Backfill may start them early only down to their
    --time-min: every job the hook changed must start with a limit at or above its --time-min
    and at or below its --time, and each (running 200 s, within its --time-min) must complete,
    not be killed. (With --time-min at the point estimate, backfill starts them in the
    blocker's shadow with a 1-2 minute limit and they end TIMEOUT.)"""
    poll(lambda: squeue_empty(cluster), 180, "an empty queue")
    seed(daemon, "alice", "bf", BF_SCRIPT, BF_RUNTIMES)
    cluster.write_script("bf.sh", BF_SCRIPT)
    blocker, _, _, _ = cluster.sbatch("bob", "--exclusive", "-N", "4", "-t", "3", "-J", "blocker", "-o", "/dev/null",
                                      "--wrap", "sleep 170")
    poll(lambda: cluster.job(blocker).get("JobState") == "RUNNING", 30, "the blocker to run")
    head, _, _, _ = cluster.sbatch("bob", "--exclusive", "-N", "8", "-t", "1", "-J", "head", "-o", "/dev/null",
                                   "--wrap", "sleep 5")
    small = []
    for _ in range(4):
        job_id, _, stderr, _ = cluster.sbatch("alice", "--exclusive", "-N", "1", "-t", "10", "-o", "/dev/null",
                                              "bf.sh")
        small.append((job_id, submit_id(stderr)))
    changed = 0
    for job_id, prediction_id in small:
        job = final(cluster, job_id)
        row = prediction_row(daemon, prediction_id)
        assert "walltime" in row.model_name and row.policy_reason == "time_min", (row.model_name, row.policy_reason)
        assert row.runtime_s < BF_SLEEP <= row.decided_time_min_s, "the history no longer makes the point estimate too short"
        assert row.decided_time_min_s == max(300, math.ceil(row.bound_s / 60) * 60), (row.bound_s, row.decided_time_min_s)
        limit_s = slurmjob.slurm_duration_s(job["TimeLimit"])
        if job.get("TimeMin", "N/A") not in ("N/A", ""):
            changed += 1
            assert row.decided_time_min_s <= limit_s <= 600, (job_id, job["TimeLimit"], row.decided_time_min_s)
        assert job["JobState"] == "COMPLETED", (job_id, job["JobState"], job.get("Reason"), job["TimeLimit"])
        assert ";time_min=auto" in slurmjob.our_field(job["AdminComment"])
    assert changed == len(small)          # the hook set --time-min on every small job
    for job_id in (blocker, head):
        cluster.wait_done(job_id, timeout=60)


def test_partition_max_time_below_the_floor(cluster, daemon, walltime_model):
    """MaxTime=3 min in partition "short", the hook's floor is 5 min: the limit it sets is
    clamped to 3 min and the job runs (not PENDING on PartitionTimeLimit)."""
    script = "#!/bin/bash\n#SBATCH -J shortjob\nsleep 2\n"
    seed(daemon, "carol", "shortjob", script, [20.0, 25.0, 22.0], partition="short")
    cluster.write_script("shortjob.sh", script)
    job_id, _, stderr, _ = cluster.sbatch("carol", "-p", "short", "-N", "1", "-o", "/dev/null", "shortjob.sh")
    assert "no --time given, set --time=00:03:00 (the partition/QOS maximum)" in stderr, stderr
    job = cluster.job(job_id)
    assert job["TimeLimit"] == "00:03:00" and ";limit=auto" in job["AdminComment"]
    job = final(cluster, job_id)
    assert job["JobState"] == "COMPLETED", job


def estimate_reply(**fields) -> bytes:
    estimate = {"prediction_id": "0" * 32, "runtime_s": 600, "suggested_time_limit_s": 960, "risk": 0.03,
                "interval": {"low_s": 400, "high_s": 900, "coverage": 0.8}}
    estimate.update(fields)
    return json.dumps({"ok": True, "response": estimate}).encode()


@pytest.mark.parametrize("value", [5e8, -5, float("nan")])
def test_absurd_replies_change_nothing_and_print_nothing(cluster, value, tmp_path):
    """The real daemon cannot produce these replies (its bound is a uint32 of a checked model):
    a fake local-socket server answers every hook (submit and PrologSlurmctld) with them."""
    fake = FakeHookServer(str(tmp_path / "absurd.sock"),
                          "reply", estimate_reply(suggested_time_limit_s=value, runtime_s=value))
    cluster.set_hook_socket(fake.path)
    try:
        job_id, _, stderr, _ = cluster.sbatch("alice", "-N", "1", "-t", "7", "-o", f"absurd-%j.out",
                                              "--wrap", "sleep 1")
        job = cluster.job(job_id)
        assert "hpcpredict:" not in stderr
        assert job["TimeLimit"] == "00:07:00" and job["TimeMin"] == "N/A"
        assert "hpcpredict" not in job.get("AdminComment", "")
        cluster.wait_done(job_id)
        poll(lambda: f"prolog_slurmctld job {job_id}: insane estimate" in cluster.hooks_log(), 30,
             "the prolog's insane-estimate line")
        assert fake.accepted >= 2                   # the submit hook and the prolog both asked
    finally:
        cluster.set_hook_socket(cluster.daemon.hook_socket)
        fake.close()
    output = (cluster.jobs / f"absurd-{job_id}.out").read_text()
    assert "[hpcpredict]" not in output
    assert "insane estimate" in cluster.ctld_log()
    assert "hpcpredict" not in cluster.job(job_id).get("AdminComment", "")


def test_admin_comment_shared_with_a_site_tool(cluster, daemon):
    """A site tool keeps its data in AdminComment: the prolog keeps it beside our field; when
    the tool later rewrites the whole field (as Jobstats does), the outcome is still linked to
    the allocation-time prediction, by job id."""
    script = "#!/bin/bash\n#SBATCH -J sitejob\nsleep 8\n"
    seed(daemon, "bob", "sitejob", script, [8.0, 9.0, 8.5])
    cluster.write_script("sitejob.sh", script)
    job_id, _, stderr, _ = cluster.sbatch("bob", "--hold", "-N", "1", "-t", "5", "-o", "/dev/null", "sitejob.sh")
    ours = slurmjob.our_field(cluster.job(job_id)["AdminComment"])
    assert ours.startswith(f"hpcpredict={submit_id(stderr)}")
    subprocess.run(["scontrol", "update", f"jobid={job_id}", f"AdminComment=site:cost=3 {{{ours}}}"],
                   env=cluster.env(), check=True, timeout=10)
    subprocess.run(["scontrol", "release", job_id], env=cluster.env(), check=True, timeout=10)
    poll(lambda: cluster.job(job_id).get("JobState") == "RUNNING", 60, "the job to run")
    def prolog_field():
        comment = cluster.job(job_id)["AdminComment"]
        return comment if ";alloc=" in comment else None
    comment = poll(prolog_field, 30, "the prolog's field")
    assert comment.startswith("site:cost=3 {hpcpredict=")
    allocation_id = re.search(r";alloc=(\w+)", comment).group(1)
    subprocess.run(["scontrol", "update", f"jobid={job_id}", "AdminComment=JS1:rewritten-by-the-site-tool"],
                   env=cluster.env(), check=True, timeout=10)
    cluster.wait_done(job_id)

    def linked():
        db = sqlite3.connect(str(daemon.data_dir / "hpcpredict.sqlite"))
        try:
            rows = db.execute("SELECT prediction_id FROM jobs WHERE job_id = ? AND source = 'outcome'",
                              (job_id,)).fetchall()
        finally:
            db.close()
        return rows[0] if rows else None
    assert poll(linked, 90, f"the outcome of job {job_id}", 1.0) == (allocation_id,)
