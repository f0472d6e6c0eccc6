"""Local attacks on the daemon's sockets, as an ordinary user would make them, and what they cost.

    python -m benchmarks run attacks [--predicts 200]

The real daemon (``hpcpredictd`` subprocess, bundled models) and a throwaway ordinary user
created for the run (needs root: ``useradd``/``userdel``). Each attack runs as that user in
child processes while root measures Predict on the local socket (sequential calls, latency
per call) and the daemon's open descriptors:

* ``admin_flood``: 4 processes looping ReloadModels (and GetStatus with a forged client
  socket path); how many were served, Predict p50/p99 meanwhile;
* ``history``: 20 ReportOutcome as another user ("bob"); bob's suggested limit before/after;
* ``connection_flood``: 1,400 connections held open; how many the daemon kept, its descriptors,
  Predict and gRPC health meanwhile, and how long until both answer after the attacker leaves;
* ``slow_clients``: 8 (then 100) clients sending one byte a second; Predict meanwhile, and how
  long each was held before the daemon cut it off.
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from benchmarks.load.openloop import start_daemon, stop_daemon

DESCRIPTION = "an ordinary user's attacks on the sockets: served/refused, Predict latency, descriptors"

JOB = {"job": {"user": "bob", "application": "lmp"}, "resources": {"nodes": 2, "ntasks": 8}, "time_limit_s": 7200}

HELPERS = textwrap.dedent('''
    import json, os, socket, sys, time

    def call(path, method, request, bind=None):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(30)
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
        return json.loads(data) if data else {}
''')


def call(path: str, method: str, request: dict, timeout: float = 30.0) -> dict:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    conn.connect(path)
    conn.sendall(json.dumps({"method": method, "request": request}).encode() + b"\n")
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    conn.close()
    return json.loads(data) if data else {}


def predict_latencies(path: str, count: int) -> dict:
    latencies, failed = [], 0
    for _ in range(count):
        start = time.perf_counter()
        try:
            ok = call(path, "Predict", JOB, timeout=10).get("ok")
        except OSError:
            ok = False
        if ok:
            latencies.append((time.perf_counter() - start) * 1e3)
        else:
            failed += 1
    latencies.sort()
    pick = (lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 2)) if latencies else (lambda q: None)
    return {"calls": count, "failed": failed, "p50_ms": pick(0.5), "p99_ms": pick(0.99)}


def healthy(grpc_socket: str, timeout: float = 1.0) -> bool:
    try:
        with grpc.insecure_channel(f"unix:{grpc_socket}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
            return reply.status == health_pb2.HealthCheckResponse.SERVING
    except grpc.RpcError:
        return False


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def as_user(user, body: str, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HELPERS + textwrap.dedent(body), *args], user=user.pw_uid,
                            group=user.pw_gid, extra_groups=[], cwd="/tmp", env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True, **popen)


def admin_flood(user, info, predicts: int) -> dict:
    body = '''
        import tempfile
        path, seconds = sys.argv[1], float(sys.argv[2])
        mine = tempfile.mkdtemp()
        codes, n, end = {}, 0, time.monotonic() + seconds
        while time.monotonic() < end:
            method, bind = ("ReloadModels", None) if n % 2 else ("GetStatus", os.path.join(mine, f"peer-uid-0-{n}"))
            reply = call(path, method, {}, bind=bind)
            code = "OK" if reply.get("ok") else reply.get("code") or reply.get("error")
            codes[code] = codes.get(code, 0) + 1
            n += 1
        print(json.dumps(codes))
    '''
    procs = [as_user(user, body, info["hook_socket"], "8") for _ in range(4)]
    time.sleep(0.5)
    during = predict_latencies(info["hook_socket"], predicts)
    codes: dict = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        for code, count in json.loads(out.strip().splitlines()[-1]).items():
            codes[code] = codes.get(code, 0) + count
    return {"attacker_replies": codes, "predict_during": during}


def history(user, info) -> dict:
    for n in range(3):   # bob's real runs, as the epilog (root here) reports them
        call(info["hook_socket"], "ReportOutcome", {"job_id": f"bob-{n}", "state": "COMPLETED", "elapsed_s": 4000,
                                                     "end_time": 1_700_000_000 + n, "request": JOB})
    before = call(info["hook_socket"], "Predict", JOB)["response"]["suggested_time_limit_s"]
    proc = as_user(user, '''
        path, job = sys.argv[1], json.loads(sys.argv[2])
        codes = {}
        for n in range(20):
            reply = call(path, "ReportOutcome", {"job_id": f"bob-next-{n}", "state": "COMPLETED", "elapsed_s": 60,
                                                 "end_time": 1_700_000_100, "request": job})
            code = "OK" if reply.get("ok") else reply.get("code")
            codes[code] = codes.get(code, 0) + 1
        print(json.dumps(codes))
    ''', info["hook_socket"], json.dumps(JOB))
    out, _ = proc.communicate(timeout=120)
    after = call(info["hook_socket"], "Predict", JOB)["response"]["suggested_time_limit_s"]
    real = call(info["hook_socket"], "ReportOutcome", {"job_id": "bob-next-0", "state": "COMPLETED", "elapsed_s": 4100,
                                                        "end_time": 1_700_000_200, "request": JOB})
    return {"attacker_replies": json.loads(out), "bob_suggested_limit_s_before": before,
            "bob_suggested_limit_s_after": after, "real_outcome_for_claimed_job_id": real.get("response")}


def connection_flood(user, info, predicts: int, connections: int = 1400) -> dict:
    baseline = open_fds(info["pid"])
    proc = as_user(user, '''
        path, count = sys.argv[1], int(sys.argv[2])
        held, busy, failed = [], 0, 0
        for _ in range(count):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(path)
                held.append(conn)
            except OSError:
                failed += 1
                conn.close()
        time.sleep(1.0)
        for conn in held:
            conn.setblocking(False)
            try:
                busy += conn.recv(100).startswith(b'{"ok":false,"error":"busy"}')
            except OSError:
                pass
        print(json.dumps({"connected": len(held), "told_busy": busy, "connect_failed": failed}), flush=True)
        sys.stdin.readline()
    ''', info["hook_socket"], str(connections))
    attacker = json.loads(proc.stdout.readline())
    during_fds = open_fds(info["pid"])
    during = predict_latencies(info["hook_socket"], predicts)
    health_during = healthy(info["socket"])
    proc.communicate("go\n", timeout=60)
    left = time.monotonic()
    recovered = None
    while time.monotonic() - left < 60:
        if healthy(info["socket"]) and call(info["hook_socket"], "Predict", JOB, timeout=2).get("ok"):
            recovered = round(time.monotonic() - left, 2)
            break
        time.sleep(0.1)
    time.sleep(0.5)
    return {"attacker": attacker, "daemon_fds_before": baseline, "daemon_fds_during": during_fds,
            "daemon_fds_after": open_fds(info["pid"]), "predict_during": during, "health_during": health_during,
            "seconds_until_health_and_predict_after": recovered}


def slow_clients(user, info, predicts: int, clients: int) -> dict:
    body = '''
        import threading
        path, clients = sys.argv[1], int(sys.argv[2])
        held = []
        def trickle():
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(path)
            start = time.monotonic()
            try:
                for byte in b'{"method": "Predict", "request": {"job": {"application": "x"}}}':
                    conn.sendall(bytes([byte]))
                    time.sleep(1.0)
            except OSError:
                pass
            held.append(time.monotonic() - start)
            conn.close()
        threads = [threading.Thread(target=trickle) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        held.sort()
        print(json.dumps({"held_s_median": round(held[len(held) // 2], 1), "held_s_max": round(held[-1], 1)}))
    '''
    proc = as_user(user, body, info["hook_socket"], str(clients))
    time.sleep(1.5)
    during = predict_latencies(info["hook_socket"], predicts)
    out, _ = proc.communicate(timeout=300)
    return {"clients": clients, "predict_during": during, "slow_clients": json.loads(out)}


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run attacks")
    parser.add_argument("--predicts", type=int, default=200, help="Predict calls measured per phase")
    args = parser.parse_args(argv)
    if os.getuid() != 0:
        raise SystemExit("benchmarks run attacks: needs root (it creates a throwaway user)")
    name = f"hpdx{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    data_dir = Path(tempfile.mkdtemp(prefix="hpd-bench-attacks-", dir="/tmp"))
    os.chmod(data_dir, 0o755)
    proc = None
    try:
        user = pwd.getpwnam(name)
        proc, info = start_daemon(data_dir)
        results = {"idle": {"predict": predict_latencies(info["hook_socket"], args.predicts),
                            "daemon_fds": open_fds(info["pid"])}}
        for phase, measure in [("admin_flood", lambda: admin_flood(user, info, args.predicts)),
                               ("history", lambda: history(user, info)),
                               ("connection_flood", lambda: connection_flood(user, info, args.predicts)),
                               ("slow_clients_8", lambda: slow_clients(user, info, args.predicts, 8)),
                               ("slow_clients_100", lambda: slow_clients(user, info, args.predicts, 100))]:
            results[phase] = measure()
            print(phase, json.dumps(results[phase]), flush=True)
        results["daemon_alive"] = proc.poll() is None
        return results
    finally:
        if proc is not None:
            stop_daemon(proc)
        subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(data_dir, ignore_errors=True)
