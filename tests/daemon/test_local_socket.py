"""The local socket (daemon/listeners/local_socket.py) of the real daemon, and the hooks' client of it.

Raw lines go over a real Unix socket; answers are checked for the contract the Lua hook and
the prolog scripts rely on: one JSON line back, ok/response or ok=false/error naming the field.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from hpcpredict.daemon.listeners import LocalSocketServer
from hpcpredict.slurm_plugin import hookclient
from tests.daemon.daemonproc import DaemonProcess


@pytest.fixture(scope="module")
def daemon():
    """One real hpcpredictd (local socket on, no bundled models) for the tests of this module."""
    path = Path(tempfile.mkdtemp(prefix="hpd-hook-", dir="/tmp"))
    os.chmod(path, 0o755)
    process = DaemonProcess(path, env={"HPCPREDICT_MODELS_BUNDLED": "false", "HPCPREDICT_DAEMON_METRICS": ""}).start()
    yield process
    process.stop()
    shutil.rmtree(path, ignore_errors=True)


def exchange(path: str, payload: bytes, timeout: float = 10.0) -> dict:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    conn.connect(path)
    try:
        try:
            conn.sendall(payload)
        except BrokenPipeError:
            pass  # a busy server answers and closes before reading; its line is still readable
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        conn.close()
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    return json.loads(data)


JOB = {"job": {"user": "carol", "job_name": "cg"}, "resources": {"nodes": 2, "ntasks": 8},
       "time_limit_s": 1200, "script": base64.b64encode(b"#!/bin/sh\nsrun ./cg.x -n 64\n").decode()}


def test_predict_answers_an_estimate(daemon):
    reply = exchange(daemon.hook_socket, json.dumps({"method": "Predict", "request": JOB}).encode() + b"\n")
    assert reply["ok"] is True
    estimate = reply["response"]
    assert len(estimate["prediction_id"]) == 32
    assert estimate["runtime_s"] > 0 and estimate["suggested_time_limit_s"] >= estimate["runtime_s"]
    assert estimate["application"] == "cg.x"


def test_several_requests_on_one_connection(daemon):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(10)
    conn.connect(daemon.hook_socket)
    reader = conn.makefile("rb")
    line = json.dumps({"method": "Predict", "request": JOB}).encode() + b"\n"
    ids = set()
    for _ in range(3):
        conn.sendall(line)
        ids.add(json.loads(reader.readline())["response"]["prediction_id"])
    conn.close()
    assert len(ids) == 3


@pytest.mark.parametrize("payload, expected", [
    (b"not json\n", "request is not JSON"),
    (b"[1, 2]\n", "request must be a JSON object"),
    (b'{"method": "Shutdown", "request": {}}\n', "method: must be one of"),
    (b'{"method": ["Predict"], "request": {}}\n', "method: must be one of"),
    (b'{"method": {"a": 1}, "request": {}}\n', "method: must be one of"),
    (b'{"method": "Predict", "request": ' + b'{"a": ' * 100_000 + b'1' + b'}' * 100_001 + b'\n', "nested too deeply"),
    (b'[' * 100_000 + b']' * 100_000 + b'\n', "nested too deeply"),
    (b'{"method": "Predict", "request": 7}\n', "request: must be a JSON object"),
    (b'{"method": "Predict", "request": {"resources": {"nodes": -4}}}\n', "request: "),
    (b'{"method": "Predict", "request": {"no_such_field": 1}}\n', "no_such_field"),
    (b'{"method": "Predict", "request": {"job": {"user": ""}}}\n', "job.user: required"),
    (b'{"method": "Predict", "request": {"job": {"user": "x"}, "script": 5}}\n', "script"),
    (b'{"method": "ReportOutcome", "request": {"job_id": "9", "state": "EXPLODED"}}\n', "state: unknown final state"),
    (b'\xff\xfe{"method": "Predict"}\n', "request is not JSON"),
])
def test_bad_requests_get_one_clear_error_line(daemon, payload, expected):
    reply = exchange(daemon.hook_socket, payload)
    assert reply["ok"] is False
    assert expected in reply["error"]
    # and the daemon keeps serving
    assert exchange(daemon.hook_socket, json.dumps({"method": "Predict", "request": JOB}).encode() + b"\n")["ok"]


def test_invalid_argument_code_is_passed_on(daemon):
    reply = exchange(daemon.hook_socket, b'{"method": "Predict", "request": {"job": {"user": "x"}, '
                                         b'"resources": {"nodes": 4, "ntasks": 2}}}\n')
    assert reply == {"ok": False, "error": reply["error"], "code": "INVALID_ARGUMENT"}
    assert reply["error"].startswith("resources.ntasks")


def test_report_outcome_is_stored_once(daemon):
    outcome = {"job_id": "local-socket-1", "state": "COMPLETED", "start_time": 1000, "end_time": 1600,
               "request": JOB}
    first = hookclient.call("ReportOutcome", outcome, socket_path=daemon.hook_socket)
    again = hookclient.call("ReportOutcome", outcome, socket_path=daemon.hook_socket)
    assert first == {"stored": True, "job_id": "local-socket-1", "duplicate": False}
    assert again["duplicate"] is True


def test_hookclient_reports_refusal_and_missing_socket(daemon, tmp_path):
    with pytest.raises(hookclient.HookRefused, match="job.user: required"):
        hookclient.call("Predict", {"job": {"user": ""}}, socket_path=daemon.hook_socket)
    with pytest.raises(hookclient.HookError, match="connect"):
        hookclient.call("Predict", JOB, socket_path=str(tmp_path / "none.sock"), timeout=0.2)


@pytest.fixture
def private_server(daemon, tmp_path):
    """A second LocalSocketServer in this process, on the service of an in-process daemon, so its
    limits (line size, workers) can be set small."""
    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.server import Daemon

    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(tmp_path / "d"), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(tmp_path)})
    inner = Daemon(config)
    inner.start()
    servers = []

    def make(**options):
        server = LocalSocketServer(str(tmp_path / f"h{len(servers)}.sock"), inner.service, **options).start()
        servers.append(server)
        return server
    yield make
    for server in servers:
        server.stop(1.0)
    inner.stop(1.0)


def test_overlong_line_is_refused(private_server):
    server = private_server(max_line_bytes=1000)
    reply = exchange(server.path, b'{"method": "Predict", "request": {"job": {"user": "' + b"x" * 5000 + b'"}}}\n')
    assert reply == {"ok": False, "error": "request line longer than 1000 bytes"}


def test_past_the_connection_cap_a_client_is_told_busy_at_once(private_server):
    server = private_server(max_connections=2)
    holders = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    for holder in holders:
        holder.connect(server.path)        # hold both connections, send nothing
    time.sleep(0.2)
    try:
        reply = exchange(server.path, json.dumps({"method": "Predict", "request": JOB}).encode() + b"\n", timeout=2)
        assert reply == {"ok": False, "error": "busy"}
    finally:
        for holder in holders:
            holder.close()
    time.sleep(0.2)
    assert exchange(server.path, json.dumps({"method": "Predict", "request": JOB}).encode() + b"\n")["ok"]


def test_slow_clients_hold_no_worker_and_are_cut_at_the_request_deadline(private_server):
    """Eight clients trickling one byte every 0.2 s: a Predict still answers at once, and each
    trickler is cut off when its whole line has not arrived within the request deadline."""
    server = private_server(workers=8, request_timeout=1.5)
    line = json.dumps({"method": "Predict", "request": JOB}).encode() + b"\n"
    cut_after = []

    def trickle():
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(server.path)
        start = time.monotonic()
        try:
            for byte in line[:-1]:
                conn.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:
            pass
        finally:
            conn.close()
        cut_after.append(time.monotonic() - start)
    threads = [threading.Thread(target=trickle) for _ in range(8)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    start = time.monotonic()
    assert exchange(server.path, line)["ok"]
    assert time.monotonic() - start < 1.0
    for thread in threads:
        thread.join(30)
    assert len(cut_after) == 8 and max(cut_after) < 5.0    # the line takes > 20 s at that pace


def test_trickled_request_gets_a_deadline_reply_and_idle_connections_close(private_server):
    server = private_server(request_timeout=0.5, idle_timeout=0.5)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(5)
    conn.connect(server.path)
    conn.sendall(b'{"method"')
    reply = json.loads(conn.makefile("rb").readline())
    assert reply == {"ok": False, "error": "request line not complete within 0.5 s"}
    conn.close()
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    idle.settimeout(5)
    idle.connect(server.path)
    start = time.monotonic()
    assert idle.recv(10) == b""     # closed by the daemon, without an answer
    assert 0.4 < time.monotonic() - start < 3
    idle.close()


def test_stop_removes_socket_and_second_server_refuses_live_socket(private_server):

    server = private_server()
    with pytest.raises(OSError, match="in use"):
        LocalSocketServer(server.path, server.service).start()
    server.stop(0.5)
    assert not os.path.exists(server.path)


def test_concurrent_clients_all_answered(daemon):
    line = json.dumps({"method": "Predict", "request": JOB}).encode() + b"\n"
    results = []

    def client():
        results.append(exchange(daemon.hook_socket, line)["ok"])
    threads = [threading.Thread(target=client) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [True] * 6
