"""The soft --time-min end to end on a real Slurm 24.11.5: set by job_submit.lua from the
daemon's decision, planned with by backfill, never enforced; and refused by the hook itself when
its slurm.conf lacks SchedulerParameters=time_min_as_soft_limit, whatever the daemon says.

Each test runs its own hpcpredictd in soft mode, in a directory under the cluster daemon's
(which the 24.11 root sees at /run/hpcpredict), and points the hooks at it. The scenario is the
one of test_slurm_2411.py: L (2 nodes, --time=2) runs, H (4 nodes) waits for it, X (2 nodes,
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

SHOW_CONFIG_2411 = Path(__file__).resolve().parents[1] / "data" / "slurm" / "show_config_24.11.5.txt"
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
def soft_daemon(cluster_2411, daemon_2411, request):
    """A soft-mode daemon the hooks of the 24.11 cluster call; ``request.param`` = how it reads
    the controller's SchedulerParameters: "live" (the cluster's own `scontrol show config`) or
    "forced" (a command that always claims the option: a daemon wrongly believing it is on)."""
    name = f"soft-{request.param}"
    server = Daemon(daemon_2411.data_dir / name)
    if request.param == "live":
        command = " ".join(cluster_2411.command(["scontrol", "show", "config"]))
    else:
        command = f"cat {SHOW_CONFIG_2411}"        # a real 24.11.5 configuration with the option
    server.env.update(HPCPREDICT_POLICY_MODE="soft", HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND=command)
    cluster_2411.cancel_all()
    server.start()
    (daemon_2411.data_dir / name).chmod(0o755)
    seed_probe_history(server)
    cluster_2411.set_hook_socket(f"/run/hpcpredict/{name}/hook.sock")
    cluster_2411.write_script("softprobe.sh", PROBE)
    yield server
    cluster_2411.cancel_all()
    cluster_2411.set_hook_socket("/run/hpcpredict/hook.sock")
    cluster_2411.set_scheduler_parameters(time_min_as_soft_limit=True)
    server.stop()


def submit(cluster, name: str, *args: str, output: str = "/dev/null") -> tuple[str, str]:
    job_id, _, stderr, _ = cluster.sbatch("alice", "-J", name, "-o", output, *args)
    return job_id, stderr


def hook_line(stderr: str) -> str:
    return next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))


@pytest.mark.parametrize("soft_daemon", ["live"], indirect=True)
def test_a_soft_time_min_set_by_the_hook_is_planned_with_and_the_job_runs_past_it(cluster_2411, soft_daemon):
    cluster = cluster_2411
    cluster.set_scheduler_parameters(time_min_as_soft_limit=True)
    soft_daemon.stop()   # re-read the controller now that the option is surely on
    soft_daemon.start()
    large, _ = submit(cluster, "L", "-N2", "--time=2", "--wrap", "sleep 90")
    poll(lambda: cluster.state(large) == "RUNNING", 30, "L to run")
    high, _ = submit(cluster, "H", "-N4", "--time=2", "--wrap", "sleep 1")
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
    assert (row.policy_mode, row.policy_reason, row.applied_time_min_s, row.applied_time_limit_s) == \
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
def test_without_the_option_the_hook_refuses_a_soft_time_min_the_daemon_sends(cluster_2411, soft_daemon):
    cluster = cluster_2411
    cluster.set_scheduler_parameters(time_min_as_soft_limit=False)   # restarts slurmctld: the hook re-reads slurm.conf
    job_id, stderr = submit(cluster, "X", "-N2", "--time=10", "softprobe.sh", "100")
    line = hook_line(stderr)
    row = prediction(soft_daemon, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
    assert (row.policy_mode, row.applied_time_min_s) == ("soft", 60)   # the daemon did say soft
    job = cluster.job(job_id)
    assert job["TimeMin"] == "N/A" and job["TimeLimit"] == "00:10:00", job   # the hook set nothing
    assert "no limit changed (soft --time-min refused" in line and "time_min_as_soft_limit" in line, line
    assert "time_min=" not in slurmjob.our_field(job["AdminComment"])
    assert "soft --time-min refused" in cluster.ctld_log()


@pytest.mark.parametrize("soft_daemon", ["live"], indirect=True)
def test_without_the_option_a_soft_daemon_reading_the_controller_only_advises(cluster_2411, soft_daemon):
    cluster = cluster_2411
    cluster.set_scheduler_parameters(time_min_as_soft_limit=False)
    soft_daemon.stop()   # re-read the controller now that the option is off
    soft_daemon.start()
    job_id, stderr = submit(cluster, "X", "-N2", "--time=10", "softprobe.sh", "100")
    line = hook_line(stderr)
    assert "kept your --time=00:10:00, suggested --time=" in line and "advice only" in line, line
    row = prediction(soft_daemon, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
    assert (row.policy_mode, row.applied_time_min_s, row.applied_time_limit_s) == ("advise", None, None)
    assert cluster.job(job_id)["TimeMin"] == "N/A"
