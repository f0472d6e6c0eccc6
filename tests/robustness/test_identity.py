"""Who may call what, tested from the attacker's side: an ordinary local user (created by the
test) with raw sockets against the real daemon, forged socket paths, connection floods, an
exhausted descriptor table.

The attacker's code runs as that user in a child process (``subprocess`` with ``user=``), so
the kernel reports its real uid to the daemon exactly as it would on a cluster's login node.
"""
from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from hpcpredict.daemon.client import DaemonClient
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.daemon.daemonproc import DaemonProcess
from tests.robustness.conftest import world_dir  # noqa: F401

JOB = {"job": {"user": "bob", "application": "lmp"}, "resources": {"nodes": 2, "ntasks": 8}, "time_limit_s": 7200}


@pytest.fixture(scope="module")
def intruder():
    """A throwaway ordinary user: no home, no shell, no groups of ours."""
    name = f"hpdx{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def daemon(world_dir):
    process = DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_REQUEST_TIMEOUT_S": "2"}).start()
    yield process
    process.stop()


ATTACKER = textwrap.dedent('''
    import json, os, socket, sys, time

    def call(path, method, request, bind=None):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(10)
        if bind:
            conn.bind(bind)
        conn.connect(path)
        conn.sendall(json.dumps({"method": method, "request": request}).encode() + b"\\n")
        data = b""
        while not data.endswith(b"\\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        conn.close()
        return json.loads(data)
''')


def as_user(user, body: str, *args: str, timeout: float = 120) -> list:
    """Run ``body`` (after the ATTACKER helpers) as ``user``; it prints one JSON value per line."""
    result = subprocess.run([sys.executable, "-c", ATTACKER + textwrap.dedent(body), *args], user=user.pw_uid,
                            group=user.pw_gid, extra_groups=[], capture_output=True, text=True, timeout=timeout,
                            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"}, cwd="/tmp")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_an_ordinary_user_gets_permission_denied_for_history_and_admin_calls_on_every_socket(daemon, intruder):
    replies = as_user(intruder, '''
        path, grpc_path, job = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
        for method, request in [
                ("ReportOutcome", {"job_id": "77", "state": "COMPLETED", "elapsed_s": 60, "request": job}),
                ("PredictAtAllocation", {"node_list": "n1", "job_id": "77", "request": job}),
                ("ReportRuntimeFeatures", {"prediction_id": "0" * 32}),
                ("ReloadModels", {}), ("ListModels", {}), ("GetStatus", {}),
                ("Predict", job)]:                     # a Predict about bob's jobs
            print(json.dumps(call(path, method, request).get("code")))
        try:
            socket.socket(socket.AF_UNIX).connect(grpc_path)
            print(json.dumps("connected"))
        except PermissionError:
            print(json.dumps("EACCES"))
        mine = call(path, "Predict", {"job": {"application": "lmp"}, "time_limit_s": 600})
        print(json.dumps(mine["ok"]))
    ''', daemon.hook_socket, daemon.socket, json.dumps(JOB))
    assert replies == ["PERMISSION_DENIED"] * 7 + ["EACCES", True]


def test_forged_peer_paths_grant_nothing(daemon, intruder):
    """A client socket's bound path (what an admin relay once trusted) grants nothing."""
    assert not (daemon.data_dir / "private").exists()
    replies = as_user(intruder, '''
        import tempfile
        path, data_dir = sys.argv[1], sys.argv[2]
        mine = tempfile.mkdtemp()
        os.symlink(os.path.join(data_dir, "private"), os.path.join(mine, "private"))
        for bind in (os.path.join(mine, "peer-uid-0-1"), "\\0peer-uid-0-2", os.path.join(mine, "private", "peer-uid-0-3")):
            try:
                print(json.dumps(call(path, "GetStatus", {}, bind=bind).get("code")))
            except OSError as error:
                print(json.dumps(type(error).__name__))
    ''', daemon.hook_socket, str(daemon.data_dir))
    assert replies == ["PERMISSION_DENIED", "PERMISSION_DENIED", "FileNotFoundError"]


def test_an_ordinary_user_cannot_steer_another_users_suggestion(daemon, intruder):
    root = DaemonClient(daemon.hook_socket)
    bob = pb.JobRequest(job=pb.JobIdentity(user="bob", application="lmp"), resources=pb.Resources(nodes=2, ntasks=8),
                        time_limit_s=7200)
    for job_id in range(3):   # bob's real history, reported by the epilog (root here)
        root.call("ReportOutcome", pb.Outcome(job_id=f"bob-{job_id}", state="COMPLETED", elapsed_s=4000,
                                              end_time=1_700_000_000 + job_id, request=bob))
    before = root.predict(bob).suggested_time_limit_s
    replies = as_user(intruder, '''
        path, job = sys.argv[1], json.loads(sys.argv[2])
        codes = set()
        for n in range(20):
            codes.add(call(path, "ReportOutcome", {"job_id": f"bob-next-{n}", "state": "COMPLETED",
                                                   "elapsed_s": 60, "request": job}).get("code"))
        print(json.dumps(sorted(codes)))
    ''', daemon.hook_socket, json.dumps(JOB))
    assert replies == [["PERMISSION_DENIED"]]
    assert root.predict(bob).suggested_time_limit_s == before
    # the job id the intruder tried to claim first is still free for the real outcome
    ack = root.call("ReportOutcome", pb.Outcome(job_id="bob-next-0", state="COMPLETED", elapsed_s=4100,
                                                end_time=1_700_000_100, request=bob))
    assert ack.stored and not ack.duplicate


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_one_users_connection_flood_is_capped_and_the_hooks_keep_answering(world_dir, intruder):
    daemon = DaemonProcess(world_dir, open_files=256,
                           env={"HPCPREDICT_DAEMON_MAX_CONNECTIONS_PER_USER": "16"}).start()
    try:
        baseline = open_fds(daemon.info["pid"])
        flood = subprocess.Popen([sys.executable, "-c", ATTACKER + textwrap.dedent('''
            path = sys.argv[1]
            held, busy = [], 0
            for _ in range(400):
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect(path)            # blocking: waits while the listen backlog is full
                held.append(conn)
            for conn in held:
                conn.setblocking(False)
            waiting, deadline = list(held), time.monotonic() + 20   # the daemon answers as fast as the load lets it
            while len(waiting) > 16 and time.monotonic() < deadline:
                time.sleep(0.05)
                for conn in list(waiting):
                    try:
                        busy += conn.recv(100) == b'{"ok":false,"error":"busy"}\\n'
                        waiting.remove(conn)
                    except BlockingIOError:
                        pass
            time.sleep(0.3)                  # and none of the 16 it keeps is told anything
            for conn in waiting:
                try:
                    busy += conn.recv(100) == b'{"ok":false,"error":"busy"}\\n'
                except BlockingIOError:
                    pass
            print(json.dumps(busy), flush=True)
            sys.stdin.readline()          # hold them until told to go
        '''), daemon.hook_socket], user=intruder.pw_uid, group=intruder.pw_gid, extra_groups=[],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/tmp", env={"HOME": "/tmp"})
        busy = json.loads(flood.stdout.readline())
        assert busy == 400 - 16                       # all but its 16 were told "busy" at once
        during = open_fds(daemon.info["pid"])
        assert during - baseline <= 16 + 4
        start = time.monotonic()
        assert DaemonClient(daemon.hook_socket).predict(pb.JobRequest(
            job=pb.JobIdentity(user="bob", application="lmp"), time_limit_s=600)).runtime_s > 0
        assert time.monotonic() - start < 2.0
        assert daemon.healthy()
        flood.communicate("go\n", timeout=30)
        time.sleep(0.5)
        assert open_fds(daemon.info["pid"]) <= baseline + 2
    finally:
        daemon.stop()


def test_an_exhausted_descriptor_table_never_stops_the_listeners(world_dir):
    """Connections past the daemon's RLIMIT_NOFILE (a cap set above it on purpose): accept
    fails with EMFILE; once they are gone, the local socket and gRPC health answer again."""
    daemon = DaemonProcess(world_dir, open_files=96, env={"HPCPREDICT_DAEMON_MAX_CONNECTIONS": "1000"}).start()
    try:
        held = []
        for _ in range(150):   # root is privileged: no per-user cap, only the (too high) total
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(daemon.hook_socket)
            held.append(conn)
        time.sleep(1.5)
        assert "out of system resource" in daemon.log() or "Too many open files" in daemon.log()
        for conn in held:
            conn.close()
        deadline = time.monotonic() + 10
        answered = False
        while time.monotonic() < deadline and not answered:
            try:
                answered = DaemonClient(daemon.hook_socket, timeout=2).predict(pb.JobRequest(
                    job=pb.JobIdentity(user="bob", application="lmp"), time_limit_s=600)).runtime_s > 0
            except Exception:
                time.sleep(0.2)
        assert answered, daemon.log()[-2000:]
        assert daemon.healthy()
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()


def test_every_user_can_ask_with_the_cli_and_errors_name_the_real_cause(daemon, intruder, world_dir):
    """`hpcpredict predict` as an ordinary user on the local socket; `status` is refused as an
    admin call, a missing daemon and an unreachable socket are told apart."""
    cli = os.path.join(os.path.dirname(sys.executable), "hpcpredict")
    script = world_dir / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH -N 2 -t 1:00:00\nsrun ./lmp -in in.lj\n")
    os.chmod(script, 0o644)
    closed = world_dir / "closed"
    closed.mkdir(mode=0o700)

    def run(*args):
        return subprocess.run([cli, *args], user=intruder.pw_uid, group=intruder.pw_gid, extra_groups=[],
                              capture_output=True, text=True, timeout=120, cwd="/tmp",
                              env={"HOME": "/tmp", "PATH": "/usr/bin:/bin", "HPCPREDICT_CONFIG_PATH": ""})
    predicted = run("--socket", daemon.hook_socket, "predict", "--json", str(script))
    assert predicted.returncode == 0, predicted.stderr
    assert json.loads(predicted.stdout)["runtime_s"] > 0
    other = run("--socket", daemon.hook_socket, "predict", "--user", "bob", str(script))
    assert other.returncode == 1 and "permission denied: job.user" in other.stderr
    status = run("--socket", daemon.hook_socket, "status")
    assert status.returncode == 1 and "GetStatus: permission denied" in status.stderr
    missing = run("--socket", str(world_dir / "none.sock"), "status")
    assert missing.returncode == 1 and "no daemon at" in missing.stderr
    unreachable = run("--socket", str(closed / "hook.sock"), "status")
    assert unreachable.returncode == 1 and "permission denied opening" in unreachable.stderr
