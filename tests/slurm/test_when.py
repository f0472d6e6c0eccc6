"""`hpcpredict when` on the real 22.05 cluster: an ordinary user asks when their job, pending
behind a running one, starts, and is answered; another user asking about it is refused.

A daemon of this test's own reads the cluster's queue (its squeue, with the cluster's SLURM_CONF)
every 2 s, with ``[forecast] sbatch_line`` on (its Predict's line says when a job like the one
asked about would start); the session daemon, which the hooks call, keeps its configuration."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
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
