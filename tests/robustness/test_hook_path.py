"""The hook path no user can starve, tested from the attacker's side against the real daemon.

Ordinary users are throwaway accounts the tests create; the Slurm hook's calls come from the
Slurm user (``slurm``, privileged by the default ``[daemon] slurm_user``). A connection is made
as a user by switching this (root) process's effective uid around ``connect()``: the kernel
records the connecting credentials (SO_PEERCRED) then, exactly as for that user's own process.
No assertion here is about time: the properties are orders and counts.
"""
from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import pwd
import socket
import subprocess
import threading
import time
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.daemon.daemonproc import DaemonProcess
from tests.robustness.conftest import world_dir  # noqa: F401

JOB = {"job": {"application": "lmp"}, "resources": {"nodes": 2, "ntasks": 8}, "time_limit_s": 3600}
SLURM = pwd.getpwnam("slurm")   # the project's test clusters run Slurm as this user (uid 64030)


@pytest.fixture(scope="module")
def users():
    """Four throwaway ordinary users."""
    names = [f"hpdh{uuid.uuid4().hex[:8]}" for _ in range(4)]
    for name in names:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield [pwd.getpwnam(name) for name in names]
    finally:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)


def connect_as(user, path: str) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(60)
    os.setegid(user.pw_gid)
    os.seteuid(user.pw_uid)
    try:
        conn.connect(path)
    finally:
        os.seteuid(0)
        os.setegid(0)
    return conn


def read_line(conn: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data) if data else {}


def call_as(user, path: str, payload: bytes) -> dict:
    with contextlib.closing(connect_as(user, path)) as conn:
        try:
            conn.sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass    # refused before it read everything: the reply is still there to read
        return read_line(conn)


def line(method: str, request: dict) -> bytes:
    return json.dumps({"method": method, "request": request}, separators=(",", ":")).encode() + b"\n"


@pytest.fixture
def daemon(world_dir):
    process = DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_MAX_CONNECTIONS": "24",
                                            "HPCPREDICT_DAEMON_RESERVED_CONNECTIONS": "4",
                                            "HPCPREDICT_DAEMON_MAX_CONNECTIONS_PER_USER": "8"}).start()
    yield process
    process.stop()


def test_an_ordinary_users_long_line_is_refused_before_it_is_whole_and_the_hooks_may_send_one(daemon, users):
    mallory = users[0]
    conn = connect_as(mallory, daemon.hook_socket)
    sent = 0
    try:
        while sent < 4 << 20:        # the hooks' limit: never reached, the reply comes first
            conn.sendall(b"x" * 65536)
            sent += 65536
    except (BrokenPipeError, ConnectionResetError):
        pass
    reply = read_line(conn)
    conn.close()
    assert reply == {"ok": False, "error": "request line longer than 131072 bytes"}
    assert sent < 1 << 20
    # the Slurm user's line of 200 KiB (a script of 150 KiB) is parsed and answered
    big = dict(JOB, job={"user": "bob", "application": "lmp"},
               script=base64.b64encode(b"#!/bin/sh\nsrun lmp\n" + b"#" * 150_000).decode())
    assert len(line("Predict", big)) > 200_000
    assert call_as(SLURM, daemon.hook_socket, line("Predict", big))["ok"] is True


@pytest.mark.parametrize("field, value, error", [
    ("argv", ["a"] * 5000, "argv: 5000 arguments exceed the limit 512"),
    ("inputs", {f"k{i}": {"number": 1} for i in range(2000)}, "inputs: 2000 inputs exceed the limit 512"),
    ("environment", {f"V{i}": "" for i in range(3000)}, "environment: 3000 variables exceed the limit 256"),
    ("comm", {"name": "explicit", "messages": [{}] * 20000}, "comm.messages: 20000 messages exceed the limit 1024"),
])
def test_an_over_count_request_is_refused_before_it_is_parsed(daemon, users, field, value, error):
    """The request also carries an unknown field, which parsing would have refused first: the
    answer naming the count shows that none of it was turned into a message."""
    request = dict(JOB, no_such_field=1, **{field: value})
    payload = line("Predict", request)
    assert len(payload) < 131072
    assert call_as(users[0], daemon.hook_socket, payload) == {"ok": False, "error": error, "code": "INVALID_ARGUMENT"}


def test_a_call_an_ordinary_user_may_not_make_is_refused_without_parsing(daemon, users):
    reply = call_as(users[0], daemon.hook_socket, line("ReportOutcome", {"job_id": "1", "no_such_field": 1}))
    assert reply["code"] == "PERMISSION_DENIED" and "writes job history" in reply["error"]


def test_the_slurm_user_gets_through_while_ordinary_users_hold_every_slot_of_theirs(daemon, users):
    """24 connections, 4 kept for the privileged: three users hold the other 20; a fourth user
    is told busy, the Slurm hook's call is answered."""
    held = []
    try:
        for user, count in zip(users[:3], (8, 8, 8)):
            for _ in range(count):
                held.append(connect_as(user, daemon.hook_socket))
        for _ in range(3):
            reply = call_as(SLURM, daemon.hook_socket, line("Predict", dict(JOB, job={"user": "bob"})))
            assert reply["ok"] is True, reply
        # accepted in order, so every connection before the Slurm user's has had its answer
        refused = 0
        for conn in held:
            conn.setblocking(False)
            try:
                refused += conn.recv(100) == b'{"ok":false,"error":"busy"}\n'
            except BlockingIOError:
                pass     # kept, silent
        assert refused == 4
        assert call_as(users[3], daemon.hook_socket, line("Predict", JOB)) == {"ok": False, "error": "busy"}
    finally:
        for conn in held:
            conn.close()


def test_one_users_pipeline_does_not_starve_another_or_the_hook(daemon, users):
    """A user pipelines 3,000 Predicts on one connection. While it runs, another user's and the
    Slurm user's calls are each answered after at most a few of the pipeline's requests, not
    after the pipeline (requests are read one at a time, uids take turns, the hooks go first)."""
    pipeliner, other = users[0], users[1]
    conn = connect_as(pipeliner, daemon.hook_socket)
    answered = [0]
    total = 3000

    def send():
        with contextlib.suppress(OSError):
            conn.sendall(line("Predict", JOB) * total)

    def receive():
        reader = conn.makefile("rb")
        while answered[0] < total and reader.readline():
            answered[0] += 1
    threads = [threading.Thread(target=send, daemon=True), threading.Thread(target=receive, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        while answered[0] < 20:
            threads[1].join(0.01)
        passed = []
        for caller, request in ((other, JOB), (SLURM, dict(JOB, job={"user": "bob"})), (other, JOB)):
            before = answered[0]
            reply = call_as(caller, daemon.hook_socket, line("Predict", request))
            passed.append(answered[0] - before)
            assert reply["ok"] is True, reply
        assert answered[0] < total
        assert max(passed) <= 50, passed     # a whole read of the pipeline (64 KiB) is ~600 requests
    finally:
        conn.close()
        for thread in threads:
            thread.join(30)


# ---------------------------------------------------------------- the loop itself (in process)

@pytest.fixture
def in_process(tmp_path, monkeypatch):
    """A daemon in this process (local socket on), so a fault can be put into its loop."""
    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.server import Daemon

    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(tmp_path / "d"), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_CONFIG_PATH": "", "HOME": str(tmp_path)})
    daemon = Daemon(config).start()
    yield daemon
    daemon.stop(1.0)


def _predict_as_root(path: str) -> dict:
    with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as conn:
        conn.settimeout(30)
        conn.connect(path)
        conn.sendall(line("Predict", dict(JOB, job={"user": "bob"})))
        return read_line(conn)


def _health(daemon) -> int:
    with grpc.insecure_channel(f"unix:{daemon.socket_path}") as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status


def test_an_exception_in_the_loop_does_not_close_the_listener(in_process):
    server = in_process.local_socket
    errors = in_process.metrics.local_socket_errors
    before = errors._value.get()
    broken = {"accept": 1, "read": 1}
    real_admit, real_read = server._admit, server._read

    def admit(*args):
        if broken["accept"]:
            broken["accept"] -= 1
            raise RuntimeError("can't start new thread")    # what a task limit raised before
        return real_admit(*args)

    def read(connection):
        if broken["read"]:
            broken["read"] -= 1
            raise MemoryError("injected")
        return real_read(connection)
    server._admit, server._read = admit, read
    outcomes = []
    for _ in range(4):
        try:
            outcomes.append(_predict_as_root(server.path).get("ok"))
        except OSError:
            outcomes.append("dropped")
    assert outcomes[-1] is True and outcomes.count(True) >= 2
    assert errors._value.get() - before >= 2
    assert server.failed is None and _health(in_process) == health_pb2.HealthCheckResponse.SERVING


def test_a_loop_that_cannot_go_on_turns_health_not_serving(in_process):
    server = in_process.local_socket

    def select(timeout=None):
        raise OSError(errno.EBADF, "injected: the selector is gone")
    server._selector.select = select
    server._wake()
    assert in_process.failed.wait(60)
    assert _health(in_process) == health_pb2.HealthCheckResponse.NOT_SERVING
    assert any(line.startswith("local socket: serve: 10 loop errors") for line in in_process.engine.faults.lines())


def test_main_exits_non_zero_when_the_local_socket_dies(tmp_path, monkeypatch):
    """So Restart=on-failure (contrib/systemd) brings a daemon with a working socket back."""
    from hpcpredict.daemon import listeners, server

    def turn(self):
        raise OSError(errno.EBADF, "injected")
    monkeypatch.setattr(listeners.LocalSocketServer, "_turn", turn)
    for key, value in {"HPCPREDICT_DATA_DIR": str(tmp_path / "d"), "HPCPREDICT_CONFIG_PATH": "",
                       "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_MODELS_BUNDLED": "false"}.items():
        monkeypatch.setenv(key, value)
    umask = os.umask(0o022)   # main() sets the daemon's umask (0077) for the process: this one is pytest
    try:
        assert server.main(["--grpc-socket", str(tmp_path / "g.sock")]) == 2
    finally:
        os.umask(umask)
        import logging
        logging.getLogger().handlers[:] = []


# ---------------------------------------------------------------- the metrics endpoint

def _closed_by_server(conn: socket.socket, request: bytes = b"") -> bool:
    try:
        conn.sendall(request)
        return conn.recv(100) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def _scrape(port: int) -> bytes:
    scrape = socket.create_connection(("127.0.0.1", port), timeout=30)
    scrape.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = b""
    while chunk := scrape.recv(65536):
        reply += chunk
    scrape.close()
    return reply


def test_idle_metrics_connections_make_room_for_every_scrape_and_are_cut_off():
    """A local user holding every place of the endpoint with idle connections, renewed as
    they are cut, keeps no scrape out (before: Prometheus got 1 scrape in 30): the oldest
    connection that has asked nothing gives its place to the new one."""
    from hpcpredict.daemon.listeners import Metrics, start_metrics_server

    metrics = Metrics()
    server, port = start_metrics_server("127.0.0.1:0", metrics, max_connections=16, timeout=1.0)
    try:
        threads = threading.active_count()
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(16)]
        scraped = 0
        for _ in range(30):
            reply = _scrape(port)
            scraped += reply.startswith(b"HTTP/1.1 200 OK") and b"hpcpredict_local_socket_errors_total 0.0" in reply
            for conn in idle:                                          # renewed: always 16 held
                conn.close()
            idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(16)]
        assert scraped == 30
        assert server.refused >= 30 and threading.active_count() == threads
        for conn in idle:                        # cut off by the server, not by us
            assert _closed_by_server(conn)
            conn.close()
    finally:
        server.shutdown()


def _named_health(daemon, service: str) -> int:
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def test_a_taken_metrics_port_is_a_loud_fault_and_the_daemon_binds_it_once_it_is_free(world_dir):
    """The port held at start (by another daemon, or by a user while this one restarted): the
    daemon serves predictions, says so in `status`, the log and the health check, and takes
    the port as soon as it is free (before: the port stayed dead until the next restart)."""
    from hpcpredict.daemon.client import admin_client
    from hpcpredict.daemon.config import load_config
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    assert load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HOME": "/nonexistent"}).daemon.metrics \
        == "127.0.0.1:9464"
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        with DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_METRICS": f"127.0.0.1:{port}"}) as daemon:
            assert daemon.info["metrics_port"] is None
            assert _predict_as_root(daemon.hook_socket)["ok"] is True
            with admin_client(daemon.hook_socket) as client:
                faults = client.call("GetStatus", pb.StatusRequest()).faults
            assert any(f.startswith("metrics") and "cannot listen on" in f and "retrying" in f for f in faults), faults
            assert "metrics cannot listen on" in daemon.log()
            assert _named_health(daemon, "hpcpredict.metrics") == health_pb2.HealthCheckResponse.NOT_SERVING
            assert _named_health(daemon, "") == health_pb2.HealthCheckResponse.SERVING     # predictions are served
            taken.close()
            for _ in range(150):
                info = json.loads((world_dir / "hpcpredictd.json").read_text())
                if info["metrics_port"] == port:
                    break
                time.sleep(0.1)
            assert info["metrics_port"] == port, daemon.log()
            assert b"hpcpredict_fault" in _scrape(port)
            with admin_client(daemon.hook_socket) as client:
                assert not any(f.startswith("metrics") for f in client.call("GetStatus", pb.StatusRequest()).faults)
            assert _named_health(daemon, "hpcpredict.metrics") == health_pb2.HealthCheckResponse.SERVING
    finally:
        taken.close()
