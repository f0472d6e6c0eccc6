"""The When call on a real daemon over its real local socket and gRPC, asked by real users (alice,
bob, carol: the test users the Slurm test clusters create) with the real CLI.

The queue is the real 22.05 capture of tests/data/slurm (SOURCES.md), printed by stand-ins for
squeue and scontrol: the daemon runs them exactly as it runs Slurm's (daemon/commands.py). The
real Slurm run is tests/slurm/test_when.py; these check who may ask what, and the bounds."""
from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb, hpcpredict_pb2_grpc as pb_grpc
from tests.daemon.daemonproc import DaemonProcess
from tests.forecast.stand_ins import stand_in_settings

HPCPREDICT = str(Path(sys.executable).parent / "hpcpredict")
USERS = ("alice", "bob", "carol")


def _users_exist():
    try:
        return all(pwd.getpwnam(name) for name in USERS)
    except KeyError:
        return False


pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not _users_exist(),
                                reason="runs the CLI as alice, bob and carol (root; tests/slurm create them)")


@pytest.fixture
def when_daemon(world_dir):
    process = DaemonProcess(world_dir / "data", env={
        "HPCPREDICT_POLICY_MODE": "bound", "HPCPREDICT_MODELS_BUNDLED": "false",
        **stand_in_settings(world_dir / "bin"), "HPCPREDICT_FORECAST_INTERVAL_S": "1",
        "HPCPREDICT_FORECAST_USER_REQUESTS_PER_MINUTE": "2"})
    os.chmod(world_dir / "data", 0o755)
    process.start()
    try:
        _wait_for_forecast(process)
        yield process
    finally:
        process.stop()


def _wait_for_forecast(process, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        done = when(process, "root", "2")
        if done.returncode == 0 or time.monotonic() > deadline:
            assert done.returncode == 0, done.stderr + process.log()[-2000:]
            return
        time.sleep(0.3)


def when(process, user: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": "/tmp", "HPCPREDICT_CONFIG_PATH": ""}
    return subprocess.run([HPCPREDICT, "--socket", process.hook_socket, "when", *args], capture_output=True,
                          text=True, timeout=60, user=user, env=env)


def test_a_user_is_answered_about_their_own_pending_job_and_refused_another_users(when_daemon):
    mine = when(when_daemon, "bob", "2", "--json")
    assert mine.returncode == 0, mine.stderr
    answer = json.loads(mine.stdout)
    assert answer["job_id"] == "2" and answer["user"] == "bob" and answer["state"] == "PENDING"
    assert answer["low80_start_s"] <= answer["median_start_s"] <= answer["high80_start_s"]
    assert answer["median_start_s"] >= answer["snapshot_s"] - 1
    assert answer["squeue_start_s"] == 1796207863            # the capture's own planned start
    assert answer["runs"] == 32 and answer["planning_rule"] == "kill" and "partitions" in answer["caveats"]
    assert 0 <= answer["snapshot_age_s"] < 30
    words = when(when_daemon, "bob", "2")
    assert words.returncode == 0 and words.stdout.startswith("Job 2: likely to start in "), words.stdout
    theirs = when(when_daemon, "carol", "2")
    assert theirs.returncode == 1 and "job 2 is not yours: you (carol) may only ask about your own jobs" in theirs.stderr
    assert theirs.stdout == ""


def test_root_may_ask_about_anyones_job_and_states_are_said(when_daemon):
    other = when(when_daemon, "root", "3", "--json")
    assert other.returncode == 0 and json.loads(other.stdout)["user"] == "carol", other.stderr
    running = when(when_daemon, "alice", "1")
    assert running.returncode == 0 and running.stdout.startswith("Job 1 is running"), running.stderr
    held = when(when_daemon, "alice", "4")
    assert held.returncode == 1 and "job 4 is held (priority 0)" in held.stderr
    gone = when(when_daemon, "alice", "99")
    assert gone.returncode == 1 and "job 99 is not running or pending" in gone.stderr


def test_grpc_answers_as_the_daemons_user(when_daemon):
    with grpc.insecure_channel(f"unix:{when_daemon.socket}") as channel:
        reply = pb_grpc.PredictorStub(channel).When(pb.WhenRequest(job_id="5"), timeout=10)
    assert reply.user == "bob" and reply.state == "PENDING" and reply.median_start_s > 0


def test_a_job_not_yet_submitted_is_rate_limited_per_user(when_daemon, world_dir):
    script = world_dir / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -n 2\nsrun ./app\n")
    script.chmod(0o644)
    for _ in range(2):                                 # user_requests_per_minute = 2
        done = when(when_daemon, "alice", str(script), "-t", "10", "--json")
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer["state"] == "NEW" and answer["user"] == "alice" and answer["job_id"] == ""
        assert answer["median_start_s"] >= answer["snapshot_s"] - 1
    third = when(when_daemon, "alice", str(script), "-t", "10")
    assert third.returncode == 1 and "at most 2 forecasts of a job not yet submitted a minute" in third.stderr
    assert when(when_daemon, "bob", str(script), "-t", "10").returncode == 0      # per user: bob's own
    posing = when(when_daemon, "carol", str(script), "--user", "bob")
    assert posing.returncode == 1 and "you (carol) may only ask about your own jobs" in posing.stderr


def _raw(process, line: bytes, user: str = "alice") -> dict:
    """One request line on the local socket from a process of ``user`` (the kernel names it)."""
    code = ("import socket,sys\ns=socket.socket(socket.AF_UNIX);s.connect(sys.argv[1]);s.sendall(sys.stdin.buffer.read())\n"
            "d=b''\nwhile not d.endswith(b'\\n'):\n    c=s.recv(65536)\n    if not c: break\n    d+=c\n"
            "sys.stdout.write(d.decode())")
    done = subprocess.run([sys.executable, "-c", code, process.hook_socket], input=line, capture_output=True,
                          timeout=30, user=user)
    return json.loads(done.stdout)


def test_bad_input_is_a_clear_refusal(when_daemon):
    reply = _raw(when_daemon, b'{"method":"When","request":{"job_id":"' + b"9" * 100 + b'"}}\n')
    assert reply["code"] == "INVALID_ARGUMENT" and "not a Slurm job id" in reply["error"]
    reply = _raw(when_daemon, b'{"method":"When","request":{"job_id":"1; rm -rf /"}}\n')
    assert reply["code"] == "INVALID_ARGUMENT"
    reply = _raw(when_daemon, b'{"method":"When","request":{}}\n')
    assert reply["code"] == "INVALID_ARGUMENT" and "give a job id" in reply["error"]
    huge = b'{"method":"When","request":{"job_id":"' + b"1" * 200_000 + b'"}}\n'   # past user_line_bytes
    assert _raw(when_daemon, huge)["ok"] is False
    assert when(when_daemon, "alice", "2").returncode == 1       # and the daemon serves on (bob's job: refused)


def test_off_says_so(world_dir):
    process = DaemonProcess(world_dir / "off", env={"HPCPREDICT_FORECAST_ENABLED": "false",
                                                    "HPCPREDICT_MODELS_BUNDLED": "false"})
    os.chmod(world_dir / "off", 0o755)
    with process:
        done = when(process, "alice", "2")
    assert done.returncode == 1 and "[forecast] enabled = false" in done.stderr


def _predict_json(process, script: Path) -> dict:
    env = {**os.environ, "HOME": "/tmp", "HPCPREDICT_CONFIG_PATH": ""}
    done = subprocess.run([HPCPREDICT, "--socket", process.hook_socket, "predict", "--json", str(script),
                           "--ntasks=4", "--time=02:00:00"], capture_output=True, text=True, timeout=60,
                          user="alice", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_sbatch_line_carries_the_start_estimate_only_when_set(when_daemon, world_dir):
    """[forecast] sbatch_line through the daemon's local socket: the line gains the estimate of a
    job like this one once the thread kept its probes; the --json keys stay the same."""
    script = world_dir / "job.sh"
    script.write_text("#!/bin/sh\nsrun ./a.out\n")
    script.chmod(0o644)
    plain = _predict_json(when_daemon, script)
    assert "likely to start" not in plain["user_message"]
    process = DaemonProcess(world_dir / "on", env={
        "HPCPREDICT_POLICY_MODE": "advise", "HPCPREDICT_MODELS_BUNDLED": "false",
        **stand_in_settings(world_dir / "bin-on"), "HPCPREDICT_FORECAST_INTERVAL_S": "1",
        "HPCPREDICT_FORECAST_SBATCH_LINE": "true"})
    os.chmod(world_dir / "on", 0o755)
    with process:
        deadline = time.monotonic() + 30
        while "likely to start" not in (answer := _predict_json(process, script))["user_message"]:
            assert time.monotonic() < deadline, answer["user_message"] + process.log()[-2000:]
            time.sleep(0.3)
    assert "the estimate for a job like this one: up to 8 CPUs, planned up to 4 h)" in answer["user_message"]
    assert sorted(answer) == sorted(plain)
