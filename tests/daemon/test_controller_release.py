"""From outside: a real hpcpredictd in ``[policy] mode = "auto"`` whose controller prints a real
``scontrol show config`` with ``time_min_as_soft_limit`` in SchedulerParameters answers a soft
``--time-min`` only on a release that has the option (23.11.0+). The failure of #38: on 22.05.8
the word is accepted silently and a ``--time-min`` is a kill limit; the daemon went soft.

The configurations are real captures (tests/data/slurm/SOURCES.md: 22.05.8 from the 22.05 test
cluster, 24.11.5 from the 24.11 root); 23.02.7, 23.11.0 and 26.05.5, which this host cannot
run, are those captures with SLURM_VERSION edited.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hpcpredict.slurm_plugin import hookclient
from tests.daemon.daemonproc import DaemonProcess
from tests.daemon.slurm_configs import show_config

JOB = {"job": {"user": "ann", "application": "lmp", "partition": "batch"}, "resources": {"nodes": 1, "ntasks": 4},
       "time_limit_s": 4 * 3600}


@pytest.fixture
def auto_daemon():
    """Start a real daemon in auto mode whose controller prints the configuration of ``release``."""
    started = []

    def start(release: str) -> DaemonProcess:
        path = Path(tempfile.mkdtemp(prefix="hpd-release-", dir="/tmp"))
        os.chmod(path, 0o755)
        config = path / "show-config.txt"
        config.write_text(show_config(release))
        process = DaemonProcess(path / "data", env={
            "HPCPREDICT_MODELS_BUNDLED": "false", "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_POLICY_MODE": "auto",
            "HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND": f"cat {config}"})
        started.append((process, path))
        return process.start()
    yield start
    for process, path in started:
        process.stop()
        shutil.rmtree(path, ignore_errors=True)


def call(process: DaemonProcess, method: str, request: dict) -> dict:
    return hookclient.call(method, request, socket_path=process.hook_socket, timeout=10)


def status(process: DaemonProcess) -> dict:
    cli = Path(sys.executable).parent / "hpcpredict"
    done = subprocess.run([str(cli), "--socket", process.hook_socket, "status", "--json"], env=process.env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def read_controller(process: DaemonProcess) -> dict:
    """The daemon's status once its background check has read the controller."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        answer = call(process, "GetStatus", {})
        if answer.get("planning_rule"):
            return answer
        time.sleep(0.1)
    raise AssertionError(f"the daemon never read the controller:\n{process.log()[-2000:]}")


def with_history(process: DaemonProcess) -> None:
    """ann's earlier runs (40-43 min at --time=4:00:00), as the epilog reports them."""
    for number, elapsed in enumerate((2400.0, 2500.0, 2600.0)):
        start = 1_700_000_000 + number * 86400
        ack = call(process, "ReportOutcome", {"job_id": f"ann{number}", "state": "COMPLETED", "elapsed_s": elapsed,
                                              "submit_time": start, "start_time": start,
                                              "end_time": start + int(elapsed), "request": JOB})
        assert ack["stored"] is True


@pytest.mark.parametrize("release, mode, rule", [
    ("22.05.8", "advise", "kill"), ("23.02.7", "advise", "kill"),
    ("23.11.0", "soft", "hard_end"), ("24.11.5", "soft", "hard_end"), ("26.05.5", "soft", "soft_then_halfway")])
def test_auto_goes_soft_only_on_a_release_with_the_option(auto_daemon, release, mode, rule):
    process = auto_daemon(release)
    read_controller(process)
    with_history(process)
    estimate = call(process, "Predict", JOB)
    assert estimate["policy_mode"] == mode, estimate
    if mode == "soft":
        assert 0 < estimate["apply_time_min_s"] < JOB["time_limit_s"] and estimate["apply_time_min_s"] % 60 == 0
        assert "as a soft limit" in estimate["user_message"]
    else:
        # the same history and request: only the release differs, and no limit is set
        assert estimate.get("apply_time_min_s", 0) == 0 and estimate.get("apply_time_limit_s", 0) == 0
        assert "advice only" in estimate["user_message"]
    shown = status(process)
    assert (shown["policy_mode"], shown["slurm_release"], shown["planning_rule"]) == (mode, release, rule)
    if mode == "advise":
        assert shown["policy_reason"] == (f"Slurm {release} has no time_min_as_soft_limit (it came with 23.11.0): "
                                          "--time-min would be a kill limit")
    text = subprocess.run([str(Path(sys.executable).parent / "hpcpredict"), "--socket", process.hook_socket, "status"],
                          env=process.env, capture_output=True, text=True, timeout=60).stdout
    assert f"policy mode {mode}: " in text and f"controller: Slurm {release}, planning rule {rule}" in text
    # the daemon's log names the release and the rule once
    assert f"policy mode {mode} (configured auto; Slurm {release}, rule {rule})" in process.log()
