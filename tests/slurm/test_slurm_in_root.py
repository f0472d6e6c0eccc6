"""Slurm in a Debian root (tests/slurm/cluster/slurm-in-root.sh): the project's hooks run on
24.11.5 and 26.05.5, and the semantics of --time-min the project relies on, with and without
SchedulerParameters=time_min_as_soft_limit (24.11).

The scheduling scenario is the one measured by hand on 24.11.5 (4 whole nodes, bf_interval=2):
L (2 nodes, --time=2) runs; H (all 4 nodes) waits for it, so its reservation is at L's planned
end, under 2 minutes away; X (2 nodes, --time=10 --time-min=1) fits on the 2 free nodes before
that reservation only with its 1-minute minimum, so only backfill can start it. With the option
X keeps --time=10 and runs past its minimum; without it backfill lowers X's limit to 1 minute
(a kill limit).
"""
from __future__ import annotations

import re

import pytest

from hpcpredict.slurm_plugin import slurmjob

from .harness import poll
from .test_cluster_hooks import JOB_SCRIPT, prediction, seed_history, store


def test_plain_job_runs(root_cluster):
    cluster = root_cluster
    series = root_cluster.release.series
    version = cluster.run("sinfo", "-V").stdout
    assert version.startswith(f"slurm-wlm {series}") or version.startswith(f"slurm {series}"), version
    job_id, _, _, _ = cluster.sbatch("bob", "-N", "2", "-t", "2", "-o", "plain-%j.out", "--wrap", "srun id -un")
    cluster.wait_done(job_id)
    job = cluster.job(job_id)
    assert job["JobState"] == "COMPLETED", job
    # the job ran as bob (same uid on host and in the root) on two nodes
    output = (cluster.jobs / f"plain-{job_id}.out").read_text()
    assert [line for line in output.splitlines() if not line.startswith("[hpcpredict]")] == ["bob", "bob"]


def test_hooks_run(root_cluster):
    """job_submit.lua (Lua 5.1 in the root) asks the host's daemon and sets the job's limits;
    PrologSlurmctld and TaskProlog (the root's Python 3, as SlurmUser and as alice) put the
    allocation estimate into the job's output; EpilogSlurmctld stores the outcome."""
    cluster, daemon = root_cluster, root_cluster.daemon
    cluster.cancel_all()
    seed_history(daemon, "alice", JOB_SCRIPT, [90.0, 100.0, 95.0])
    cluster.write_script("hello-mpi.sh", JOB_SCRIPT)
    job_id, _, stderr, _ = cluster.sbatch("alice", "-t", "10", "-o", "hello-%j.out", "hello-mpi.sh")

    line = next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))
    submit_id = re.search(r"\[([0-9a-f]{32})\]$", line).group(1)
    row = prediction(daemon, submit_id)
    assert row is not None and row.stage == "submit" and row.user == "alice" and not row.fallback
    job = cluster.job(job_id)
    # what the hook said it set is what the job has; the user's --time is kept. (This daemon runs
    # bound mode, where a limit comes only from a calibrated bound: whether alice's three runs give
    # one depends on what else she ran; the soft --time-min is test_policy_soft.py's.)
    assert job["TimeLimit"] == "00:10:00"
    if "set no --time-min" in line:
        assert job["TimeMin"] == "N/A", (job["TimeMin"], line)
    else:
        assert job["TimeMin"] != "N/A" and f"--time-min={job['TimeMin']}" in line, (job["TimeMin"], line)
    assert slurmjob.our_field(job["AdminComment"]).startswith(f"hpcpredict={submit_id}")

    cluster.wait_done(job_id)
    output = (cluster.jobs / f"hello-{job_id}.out").read_text()
    first = output.splitlines()[0]
    assert first.startswith("[hpcpredict] predicted runtime"), output
    refined = prediction(daemon, re.search(r";alloc=([\w-]+)",
                                                slurmjob.our_field(cluster.job(job_id)["AdminComment"])).group(1))
    assert refined.stage == "allocation" and refined.job_id == job_id
    assert output.count("rank ") == 8

    def stored():
        db = store(daemon)
        try:
            return next((r for r in db.iter_jobs() if r.job_id == job_id), None)
        finally:
            db.close()

    outcome = poll(stored, 60, f"the outcome of job {job_id}", 0.5)
    assert outcome.state == "COMPLETED" and outcome.user == "alice" and outcome.nodes == 4
    assert 1 <= outcome.runtime_s < 120
    assert re.search(rf"epilog_slurmctld job {job_id}: outcome COMPLETED .*stored=True", cluster.hooks_log())


def submit_scenario(cluster, x_seconds: int) -> tuple[str, str, str]:
    """L, H and X of the module docstring, as alice, with the hook off (it would set its own
    --time-min on L and H); returns their ids once X runs."""
    def sub(name: str, *args: str) -> str:
        return cluster.sbatch("alice", "-J", name, "-o", "/dev/null", *args)[0]

    large = sub("L", "-N2", "--time=2", "--wrap", "sleep 90")
    poll(lambda: cluster.state(large) == "RUNNING", 30, "L to run")
    high = sub("H", "-N4", "--time=2", "--wrap", "sleep 1")
    small = sub("X", "-N2", "--time=10", "--time-min=1", "--wrap", f"sleep {x_seconds}")
    poll(lambda: cluster.state(small) == "RUNNING", 30, "X to start")
    return large, high, small


@pytest.fixture
def hook_off(cluster_2411):
    with cluster_2411.hook_off() as cluster:
        yield cluster


def test_without_time_min_as_soft_limit_backfill_lowers_the_limit_to_time_min(hook_off):
    cluster = hook_off
    cluster.set_scheduler_parameters(time_min_as_soft_limit=False)
    _, high, small = submit_scenario(cluster, 100)
    x = cluster.job(small)
    assert x["Scheduler"] == "Backfill", x           # started early, in front of H, by backfill
    assert x["TimeLimit"] == "00:01:00" and x["TimeMin"] == "00:01:00", x   # a kill limit now
    assert cluster.state(high) == "PENDING"
    # (X would be killed TIMEOUT at about 1:30; the lowered limit is what the project relies on)


def test_with_time_min_as_soft_limit_the_job_keeps_its_time_and_completes(hook_off):
    cluster = hook_off
    cluster.set_scheduler_parameters(time_min_as_soft_limit=True)
    # past its 1-minute minimum and past the next periodic time-limit check (every 30 s)
    x_seconds = 100
    _, high, small = submit_scenario(cluster, x_seconds)
    x = cluster.job(small)
    assert x["Scheduler"] == "Backfill", x
    assert x["TimeLimit"] == "00:10:00" and x["TimeMin"] == "00:01:00", x
    assert cluster.state(high) == "PENDING"
    cluster.wait_done(small, timeout=x_seconds + 60)
    x = cluster.job(small)
    assert x["JobState"] == "COMPLETED", x
    assert slurmjob.slurm_duration_s(x["RunTime"]) >= x_seconds and x["TimeLimit"] == "00:10:00", x
