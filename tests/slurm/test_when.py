"""`hpcpredict when` on the real 22.05 cluster: an ordinary user asks when their job, pending
behind a running one, starts, and is answered; another user asking about it is refused. On the
real 26.05.5 cluster: the keeper reads that release's squeue and the answer plans with its rule.

A daemon of each test's own reads the cluster's queue (its squeue, with the cluster's SLURM_CONF)
every 1-2 s (on 22.05 with ``[forecast] sbatch_line`` on: its Predict's line says when a job like
the one asked about would start); the session daemon, which the hooks call, keeps its configuration."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .harness import SLURM_DIR, VENV_BIN, Daemon, poll


@pytest.fixture
def forecasting_daemon(cluster):
    data_dir = Path(tempfile.mkdtemp(prefix="hpd-when-", dir="/tmp"))   # pytest's tmp is root's only: users
    data_dir.chmod(0o755)                                             # must reach the socket
    server = Daemon(data_dir)
    server.env.update(SLURM_CONF=str(SLURM_DIR / "etc" / "slurm.conf"), HPCPREDICT_FORECAST_INTERVAL_S="2",
                      HPCPREDICT_FORECAST_SBATCH_LINE="true")
    server.start()
    yield server
    server.stop()
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def forecasting_daemon_2605(cluster_2605):
    """A daemon in the default mode (auto) reading 26.05.5's controller and queue through host
    wrappers of the root's scontrol and squeue, its forecast refreshed every second."""
    data_dir = Path(tempfile.mkdtemp(prefix="hpd-when-2605-", dir="/tmp"))
    data_dir.chmod(0o755)
    tools = cluster_2605.client_wrappers(data_dir / "bin")
    server = Daemon(data_dir / "data")
    server.env.update(HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND=f"{tools / 'scontrol'} show config",
                      HPCPREDICT_FORECAST_SQUEUE_COMMAND=str(tools / "squeue"), HPCPREDICT_FORECAST_INTERVAL_S="1")
    cluster_2605.cancel_all()
    server.start()
    (data_dir / "data").chmod(0o755)
    yield server
    server.stop()
    cluster_2605.cancel_all()
    shutil.rmtree(data_dir, ignore_errors=True)


def when(server: Daemon, user: str, *args: str, command: str = "when") -> subprocess.CompletedProcess:
    env = dict(server.cli_env(), HOME="/tmp", HPCPREDICT_CONFIG_PATH="")
    return subprocess.run(["runuser", "-u", user, "--", str(VENV_BIN / "hpcpredict"), "--socket", server.hook_socket,
                           command, *args], env=env, capture_output=True, text=True, timeout=60)


def test_a_user_asks_when_their_pending_job_starts_and_another_is_refused(cluster, forecasting_daemon):
    held = []
    try:
        blocker = cluster.sbatch("alice", "-N", "8", "--exclusive", "-t", "5", "--wrap", "sleep 300")[0]
        held.append(blocker)
        poll(lambda: cluster.job(blocker).get("JobState") == "RUNNING", 60, f"job {blocker} to run")
        waiting = cluster.sbatch("bob", "-N", "2", "-t", "3", "--wrap", "sleep 1")[0]
        held.append(waiting)
        assert cluster.job(waiting).get("JobState") == "PENDING"

        answered = poll(lambda: (lambda done: done if done.returncode == 0 else None)(
            when(forecasting_daemon, "bob", waiting, "--json")), 60, f"a forecast of job {waiting}", 1.0)
        answer = json.loads(answered.stdout)
        assert answer["job_id"] == waiting and answer["user"] == "bob" and answer["state"] == "PENDING"
        assert answer["snapshot_s"] - 1 <= answer["low80_start_s"] <= answer["median_start_s"] <= answer["high80_start_s"]
        running = json.loads(when(forecasting_daemon, "alice", blocker, "--json").stdout)
        assert running["state"] == "RUNNING" and running["started_s"] > 0
        # every job at its limit (Slurm's method): bob's starts when alice's 5 minutes are up
        assert abs(answer["slurm_start_s"] - (running["started_s"] + 300)) <= 5, (answer, running)

        words = when(forecasting_daemon, "bob", waiting)
        assert words.returncode == 0 and words.stdout.startswith(f"Job {waiting}: likely to start in "), words.stderr
        refused = when(forecasting_daemon, "carol", waiting)
        assert refused.returncode == 1, refused.stdout
        assert f"job {waiting} is not yours: you (carol) may only ask about your own jobs" in refused.stderr
        assert when(forecasting_daemon, "root", waiting).returncode == 0          # an admin: any job

        # the sbatch line's estimate for a job like bob's (2 nodes, 3 min) from the probes of this queue
        script = forecasting_daemon.data_dir / "job.sh"
        script.write_text("#!/bin/sh\nsleep 1\n")
        script.chmod(0o644)
        line = poll(lambda: (lambda message: message if "likely to start" in message else None)(json.loads(
            when(forecasting_daemon, "bob", "--json", str(script), "-N", "2", "-t", "3", command="predict").stdout)
            ["user_message"]), 30, "the sbatch line's start estimate", 1.0)
        assert "the estimate for a job like this one: up to 8 CPUs, planned up to 10 min)" in line, line
    finally:
        if held:
            subprocess.run(["scancel", *held], env=cluster.env(), timeout=30)
        for job_id in held:
            cluster.wait_done(job_id)


def test_on_2605_when_answers_from_its_real_squeue_with_its_planning_rule(cluster_2605, forecasting_daemon_2605):
    """26.05 plans a running soft job at its soft end (then halfway): the daemon's facts say so, the
    answer names the rule, and the release's own backfill plan (the snapshot's StartTime) agrees."""
    cluster = cluster_2605
    # whole machine, soft --time-min 1 of --time 3 (its own: the hook leaves both jobs' limits alone)
    blocker = cluster.sbatch("alice", "-N", "4", "-t", "3", "--time-min", "1", "--wrap", "sleep 170")[0]
    poll(lambda: cluster.state(blocker) == "RUNNING", 30, f"job {blocker} to run")
    submitted = time.time()
    waiting = cluster.sbatch("bob", "-N", "2", "-t", "2", "--time-min", "2", "--wrap", "sleep 1")[0]
    assert cluster.state(waiting) == "PENDING"

    def planned():       # a snapshot after bob's submission, once backfill has planned his job
        done = when(forecasting_daemon_2605, "bob", waiting, "--json")
        answer = json.loads(done.stdout) if done.returncode == 0 else {}
        return answer if answer.get("snapshot_s", 0) >= submitted and answer.get("squeue_start_s") else None
    answer = poll(planned, 60, f"a forecast of job {waiting} with Slurm's plan", 1.0)
    assert (answer["state"], answer["user"], answer["planning_rule"]) == ("PENDING", "bob", "soft_then_halfway")
    assert answer["snapshot_s"] - 1 <= answer["low80_start_s"] <= answer["median_start_s"] <= answer["high80_start_s"]
    started = json.loads(when(forecasting_daemon_2605, "alice", blocker, "--json").stdout)["started_s"]
    assert abs(answer["slurm_start_s"] - (started + 180)) <= 5, (answer, started)       # every job at its limit
    # 26.05's backfill plans bob at alice's soft end (24.11 would say her hard end, +180 s); bf_resolution 10 s
    assert abs(answer["squeue_start_s"] - (started + 60)) <= 15, (answer, started)
