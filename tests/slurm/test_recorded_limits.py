"""What happened to a job's limits, recorded, on a real Slurm 22.05 with sched/backfill: a
``--time-min`` the daemon decided (bound mode: a kill limit here), backfill starting the job in a
blocker's shadow with its --time lowered toward that ``--time-min``, the job killed ``TIMEOUT``
below the user's --time. PrologSlurmctld read back what slurmctld held at allocation; ``explain``
shows decided, applied and ran-under apart, and ``report`` counts the kill as ours.

The test runs its own hpcpredictd (the session daemon's floor is 5 minutes, which would make
the job wait and be killed twice as late; and a job outliving its bound would move the session
daemon's adaptive risk for the tests after): a 1-minute floor there and in the hooks.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from hpcpredict.slurm_plugin import slurmjob

from .conftest import _train_walltime_model
from .harness import Daemon, poll
from .test_backfill_policy import seed, squeue_empty, submit_id

FLOOR_S = 60
SCRIPT = "#!/bin/bash\n#SBATCH -J rec\nsleep 900\n"     # its history says 20-30 s: it outlives any bound


@pytest.fixture(scope="module")
def own_daemon(cluster, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("hpcpredictd-recorded")
    data_dir.chmod(0o755)
    server = Daemon(data_dir)
    server.env["HPCPREDICT_POLICY_MIN_TIME_LIMIT_S"] = str(FLOOR_S)
    server.start()
    try:
        _train_walltime_model(server)
        cluster.hooks_conf["min_time_limit_s"] = str(FLOOR_S)
        cluster.set_hook_socket(server.hook_socket)      # job_submit.lua and the prolog/epilog scripts
        yield server
    finally:
        cluster.hooks_conf.pop("min_time_limit_s", None)
        cluster.set_hook_socket(cluster.daemon.hook_socket)
        server.stop()


def _scancel(cluster, *job_ids: str) -> None:
    subprocess.run(["scancel", *job_ids], env=cluster.env(), capture_output=True, timeout=10)


def test_a_kill_under_our_lowered_limit_is_recorded_explained_and_counted(cluster, own_daemon):
    poll(lambda: squeue_empty(cluster), 300, "an empty queue")
    seed(own_daemon, "alice", "rec", SCRIPT, [20.0, 25.0, 20.0, 30.0, 25.0])
    cluster.write_script("rec.sh", SCRIPT)
    # held while the shadow is prepared: the hook decides at submission, so its --time-min is known
    job_id, _, stderr, _ = cluster.sbatch("alice", "--hold", "--exclusive", "-N", "1", "-t", "10", "-o", "/dev/null",
                                          "rec.sh")
    submitted = cluster.job(job_id)
    time_min_s = slurmjob.slurm_duration_s(submitted["TimeMin"])
    assert submitted["TimeLimit"] == "00:10:00" and 0 < time_min_s <= 300, (submitted, stderr)
    assert ";time_min=auto" in slurmjob.our_field(submitted["AdminComment"])
    # a blocker on 4 of the 8 nodes for time_min + 2 minutes, a head job waiting for all 8: backfill
    # may start the held job on a free node only with its limit lowered to end before the head starts
    shadow_min = time_min_s // 60 + 2
    blocker, _, _, _ = cluster.sbatch("bob", "--exclusive", "-N", "4", "-t", str(shadow_min), "-J", "blocker",
                                      "-o", "/dev/null", "--wrap", f"sleep {shadow_min * 60 - 10}")
    head = blocker
    try:
        poll(lambda: cluster.job(blocker).get("JobState") == "RUNNING", 30, "the blocker to run")
        head, _, _, _ = cluster.sbatch("bob", "--exclusive", "-N", "8", "-t", "1", "-J", "head", "-o", "/dev/null",
                                       "--wrap", "sleep 1")
        subprocess.run(["scontrol", "release", job_id], env=cluster.env(), check=True, timeout=10)
        poll(lambda: cluster.job(job_id).get("JobState") == "RUNNING", 60, "backfill to start the job")
        started = cluster.job(job_id)
        started_limit_s = slurmjob.slurm_duration_s(started["TimeLimit"])
        assert time_min_s <= started_limit_s < 600, started       # lowered at start: 22.05's time_min start
        cluster.wait_done(job_id, timeout=shadow_min * 60 + 120)
        ended = cluster.job(job_id)
        assert ended["JobState"] == "TIMEOUT", ended
    finally:
        _scancel(cluster, blocker, head)

    def explained():
        done = own_daemon.cli("explain", job_id, "--json")
        if done.returncode != 0:
            return None
        result = json.loads(done.stdout)
        ready = result["job"] and result["job"]["source"] == "outcome" and \
            any(p["stage"] == "allocation" for p in result["predictions"])
        return result if ready else None
    result = poll(explained, 120, f"the outcome of job {job_id} in the store", 1.0)
    [submit] = [p for p in result["predictions"] if p["stage"] == "submit"]
    [allocation] = [p for p in result["predictions"] if p["stage"] == "allocation"]
    assert submit["prediction_id"] == submit_id(stderr)
    assert (submit["decided_time_min_s"], submit["set_time_min_s"], submit["policy_mode"]) == \
        (time_min_s, time_min_s, "bound")
    # what PrologSlurmctld read back from slurmctld at allocation
    assert (allocation["started_time_min_s"], allocation["started_time_limit_s"]) == (time_min_s, started_limit_s)
    assert allocation["decided_time_limit_s"] is None      # the user gave --time: nothing to lower at allocation
    assert result["limits"] == {
        "requested_time_s": 600.0, "policy_mode": "bound", "decided_time_min_s": time_min_s,
        "decided_time_limit_s": None, "decided_at_allocation_time_limit_s": None, "applied_time_min_s": time_min_s,
        "started_time_limit_s": started_limit_s, "lowered_at_start": True, "ran_time_limit_s": float(started_limit_s),
        "killed_by_our_limit": True}
    assert result["job"]["state"] == "TIMEOUT" and result["job"]["runtime_s"] < 600 - 60
    text = own_daemon.cli("explain", job_id).stdout
    print(text)     # what an admin reads (pytest -rP shows it)
    for line in (f"decided at submission: --time-min {slurmjob.slurm_minutes(time_min_s).zfill(8)} [bound mode]",
                 f"applied (slurmctld at allocation): TimeMin {slurmjob.slurm_minutes(time_min_s).zfill(8)}",
                 f"started under: TimeLimit {slurmjob.slurm_minutes(started_limit_s).zfill(8)} (lowered at start",
                 "killed by our limit"):
        assert line in text, text
    report = json.loads(own_daemon.cli("report", "--json", "--user", "alice").stdout)
    assert report["all"]["killed_by_our_limit"] == 1, report     # the seeded runs completed
