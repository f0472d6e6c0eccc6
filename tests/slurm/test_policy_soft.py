"""The soft --time-min end to end on a real Slurm 24.11.5 and 26.05.5 (the two planning rules of a
running soft job: its hard end, and from 25.05.4 its soft end then halfway): set by
job_submit.lua from the daemon's decision in its default ``auto`` mode, planned with by
backfill, never enforced; refused by the hook itself when its slurm.conf lacks
SchedulerParameters=time_min_as_soft_limit, whatever the daemon says; and fail-open when the
daemon is down.

Each test runs its own hpcpredictd, in a directory under the cluster daemon's (which the root
sees at /run/hpcpredict), and points the hooks at it. The scenario is the one of
test_slurm_in_root.py: L (2 nodes, --time=2) runs, H (4 nodes) waits for it, X (2 nodes,
--time=10, no --time-min of its own) fits before H's reservation only with a 1-minute limit.
"""
from __future__ import annotations

import base64
import re
import time
from pathlib import Path

import pytest

from hpcpredict.slurm_plugin import slurmjob

from .harness import Daemon, poll
from .test_cluster_hooks import prediction

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
PROBE = """#!/bin/bash
#HPCPREDICT app=softprobe
sleep "${1:-100}"
"""


def seed_probe_history(daemon, runtimes=(40.0, 45.0, 50.0)) -> None:
    """alice's earlier probe runs, as the epilog reports them: the point estimate is under a minute."""
    now = int(time.time())
    request = {"job": {"user": "alice", "job_name": "softprobe", "partition": "debug"}, "resources": {"nodes": 2},
               "time_limit_s": 600, "script": base64.b64encode(PROBE.encode()).decode()}
    for index, runtime in enumerate(runtimes):
        ack = daemon.call("ReportOutcome", {"job_id": f"probe-{index}", "state": "COMPLETED", "elapsed_s": runtime,
                                            "start_time": now - 3600 + index * 100,
                                            "end_time": now - 3600 + index * 100 + int(runtime), "request": request})
        assert ack["stored"] is True


@pytest.fixture
def soft_daemon(root_cluster, request):
    """A daemon the hooks of the cluster call; ``request.param`` = how it decides: "live" (the
    default mode, auto, reading the cluster's own `scontrol show config`) or "forced" (soft mode
    reading a real configuration of the release with the option, captured earlier: a daemon
    wrongly believing the option is on)."""
    cluster = root_cluster
    name = f"soft-{request.param}"
    server = Daemon(cluster.daemon.data_dir / name)
    if request.param == "live":
        mode, command = "auto", " ".join(cluster.command(["scontrol", "show", "config"]))
    else:
        mode, command = "soft", f"cat {DATA / f'show_config_{cluster.release.version}.txt'}"
    server.env.update(HPCPREDICT_POLICY_MODE=mode, HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND=command)
    cluster.cancel_all()
    server.start()
    (cluster.daemon.data_dir / name).chmod(0o755)
    seed_probe_history(server)
    cluster.set_hook_socket(f"/run/hpcpredict/{name}/hook.sock")
    cluster.write_script("softprobe.sh", PROBE)
    yield server
    cluster.cancel_all()
    cluster.set_hook_socket("/run/hpcpredict/hook.sock")
    cluster.set_scheduler_parameters(time_min_as_soft_limit=True)
    server.stop()


def submit(cluster, name: str, *args: str, output: str = "/dev/null") -> tuple[str, str]:
    job_id, _, stderr, _ = cluster.sbatch("alice", "-J", name, "-o", output, *args)
    return job_id, stderr


def hook_line(stderr: str) -> str:
    return next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))


@pytest.mark.parametrize("soft_daemon", ["live"], indirect=True)
def test_a_soft_time_min_set_by_the_hook_is_planned_with_and_the_job_runs_past_it(root_cluster, soft_daemon):
    cluster = root_cluster
    cluster.set_scheduler_parameters(time_min_as_soft_limit=True)
    soft_daemon.stop()   # re-read the controller now that the option is surely on
    soft_daemon.start()
    # L and H give their own --time-min (= --time), so the hook leaves them alone: with alice's
    # history it would give L a soft minute too, and 26.05 would plan H at L's soft end, too
    # soon for X's minute (24.11 plans L at its hard end whatever its --time-min)
    large, _ = submit(cluster, "L", "-N2", "--time=2", "--time-min=2", "--wrap", "sleep 90")
    poll(lambda: cluster.state(large) == "RUNNING", 30, "L to run")
    high, _ = submit(cluster, "H", "-N4", "--time=2", "--time-min=2", "--wrap", "sleep 1")
    small, stderr = submit(cluster, "X", "-N2", "--time=10", "softprobe.sh", "100", output="softx-%j.out")
    line = hook_line(stderr)
    assert "set --time-min=00:01:00 as a soft limit: planned with 1 min, never stopped before your --time=00:10:00" \
        in line, line
    poll(lambda: cluster.state(small) == "RUNNING", 30, "X to start")
    x = cluster.job(small)
    assert x["Scheduler"] == "Backfill", x            # started in front of H, on its soft minimum
    assert (x["TimeLimit"], x["TimeMin"]) == ("00:10:00", "00:01:00"), x
    assert ";time_min=soft" in slurmjob.our_field(x["AdminComment"]), x["AdminComment"]
    assert cluster.state(high) == "PENDING"
    row = prediction(soft_daemon, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
    assert (row.policy_mode, row.policy_reason, row.decided_time_min_s, row.decided_time_limit_s) == \
        ("soft", "soft_time_min", 60, None)
    cluster.wait_done(small, timeout=160)
    x = cluster.job(small)
    assert x["JobState"] == "COMPLETED", x             # ran past its --time-min: never stopped there
    assert slurmjob.slurm_duration_s(x["RunTime"]) >= 100 and x["TimeLimit"] == "00:10:00", x
    # the job's output (TaskProlog) says what the soft limit did
    output = (cluster.jobs / f"softx-{small}.out").read_text()
    assert "[hpcpredict] hpcpredict set --time-min=0:01:00 as a soft limit: the scheduler planned with it; " \
           "the job is never stopped before its --time=0:10:00" in output, output


@pytest.mark.parametrize("soft_daemon", ["forced"], indirect=True)
def test_without_the_option_the_hook_refuses_a_soft_time_min_the_daemon_sends(root_cluster, soft_daemon):
    cluster = root_cluster
    cluster.set_scheduler_parameters(time_min_as_soft_limit=False)   # restarts slurmctld: the hook re-reads slurm.conf
    job_id, stderr = submit(cluster, "X", "-N2", "--time=10", "softprobe.sh", "100")
    line = hook_line(stderr)
    row = prediction(soft_daemon, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
    assert (row.policy_mode, row.decided_time_min_s) == ("soft", 60)   # the daemon did say soft
    job = cluster.job(job_id)
    assert job["TimeMin"] == "N/A" and job["TimeLimit"] == "00:10:00", job   # the hook set nothing
    assert "no limit changed (soft --time-min refused" in line and "time_min_as_soft_limit" in line, line
    assert "time_min=" not in slurmjob.our_field(job["AdminComment"])
    assert "soft --time-min refused" in cluster.ctld_log()


@pytest.mark.parametrize("soft_daemon", ["live"], indirect=True)
def test_without_the_option_the_daemon_reading_the_controller_only_advises(root_cluster, soft_daemon):
    cluster = root_cluster
    cluster.set_scheduler_parameters(time_min_as_soft_limit=False)
    soft_daemon.stop()   # re-read the controller now that the option is off
    soft_daemon.start()
    job_id, stderr = submit(cluster, "X", "-N2", "--time=10", "softprobe.sh", "100")
    line = hook_line(stderr)
    # the suggestion may be the request itself (an uncalibrated bound keeps it): either way the
    # line says the request was kept and nothing was changed
    assert "kept your --time=00:10:00" in line and "advice only: hpcpredict changes no limit here" in line, line
    row = prediction(soft_daemon, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
    assert (row.policy_mode, row.decided_time_min_s, row.decided_time_limit_s) == ("advise", None, None)
    assert cluster.job(job_id)["TimeMin"] == "N/A"


@pytest.mark.parametrize("soft_daemon", ["live"], indirect=True)
def test_with_the_daemon_stopped_the_job_is_accepted_unchanged(root_cluster, soft_daemon):
    """Fail-open on the soft path: the daemon that would set a soft --time-min is down."""
    cluster = root_cluster
    cluster.set_scheduler_parameters(time_min_as_soft_limit=True)
    def fail_open_lines():
        return [line for line in cluster.ctld_log().splitlines()
                if "fail-open" in line and "No such file or directory" in line]
    before = len(fail_open_lines())
    soft_daemon.stop()
    try:
        job_id, stderr = submit(cluster, "X", "-N2", "--time=10", "softprobe.sh", "1")
    finally:
        soft_daemon.start()
    assert "hpcpredict:" not in stderr, stderr
    job = cluster.job(job_id)
    assert (job["TimeLimit"], job["TimeMin"]) == ("00:10:00", "N/A"), job
    assert not re.search(r"hpcpredict=\w", job.get("AdminComment", "")), job
    poll(lambda: len(fail_open_lines()) > before, 10, "the fail-open line in slurmctld.log")
