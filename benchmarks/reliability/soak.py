"""Soak: valid traffic for a while with hostile clients alongside, then kill -9.

Valid clients (gRPC): Predict then ReportOutcome for a new job id, as the Slurm hooks do; each
acknowledged outcome is remembered. Hostile clients, all at once: distinct 1 MiB scripts,
large environment maps, zero-padded host lists, huge argv words, and connections to the hook
socket that send one byte a second or nothing at all. RSS, open descriptors and the store's
size are sampled every few seconds; valid-call latency is kept per interval. At the end the
daemon is killed with SIGKILL, restarted on the same directory, and every acknowledged outcome
is looked for in the store.
"""
from __future__ import annotations

import json
import signal
import socket
import sqlite3
import threading
import time

import grpc

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

from .attacks import _job, _script
from .target import Target


def _valid(target: Target, stop: threading.Event, name: str, acked: set, latencies: list, errors: dict) -> None:
    number = 0
    while not stop.is_set():
        number += 1
        job_id = f"{name}-{number}"
        started = time.perf_counter()
        try:
            estimate = target.stub.Predict(_job(user=f"user{number % 7}"), timeout=30)
            latencies.append((time.monotonic(), (time.perf_counter() - started) * 1000))
            ack = target.stub.ReportOutcome(pb.Outcome(
                job_id=job_id, prediction_id=estimate.prediction_id, elapsed_s=60 + number % 600,
                state="COMPLETED", end_time=int(time.time()), request=_job(user=f"user{number % 7}")), timeout=30)
            if ack.stored:
                acked.add(job_id)
        except grpc.RpcError as error:
            errors[error.code().name] = errors.get(error.code().name, 0) + 1
            time.sleep(0.05)


def _hostile(target: Target, stop: threading.Event, counts: dict) -> None:
    index = 0
    while not stop.is_set():
        index += 1
        kind = ("script", "environment", "hostlist", "argv")[index % 4]
        request = _job(user="mallory")
        if kind == "script":
            request.script = _script(index, 1 << 20)
        elif kind == "environment":
            request.environment.update({f"V{index}_{i}": "e" * 3000 for i in range(200)})
        elif kind == "argv":
            request.argv.extend(["a" * 100_000] * 8)
        try:
            if kind == "hostlist":
                target.stub.PredictAtAllocation(pb.AllocationRequest(
                    request=request, job_id=str(index), node_list="n[0000000000000000-0000000099999999]"), timeout=30)
            else:
                target.stub.Predict(request, timeout=30)
            code = "OK"
        except grpc.RpcError as error:
            code = error.code().name
        counts[f"{kind}:{code}"] = counts.get(f"{kind}:{code}", 0) + 1
        stop.wait(0.2)


def _hook_valid(path: str, stop: threading.Event, counts: dict) -> None:
    """A valid hook client beside the idle ones (as job_submit.lua: connect, one line, close)."""
    line = b'{"method":"Predict","request":{"job":{"user":"hookuser","application":"lmp"},"time_limit_s":3600}}\n'
    while not stop.wait(0.1):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(2)
                conn.connect(path)
                conn.sendall(line)
                reply = conn.makefile("rb").readline()
            answer = json.loads(reply) if reply else {}
            key = "ok" if answer.get("ok") else f"refused: {str(answer.get('error') or 'no reply')[:50]}"
        except (OSError, ValueError):
            key = "no_answer_2s"
        counts[key] = counts.get(key, 0) + 1


def _slow_and_idle(path: str, stop: threading.Event, held: list) -> None:
    """Connections that never finish a request: half idle, half one byte a second."""
    for number in range(16):
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(2)
            conn.connect(path)
            held.append(conn)
        except OSError:
            pass
    while not stop.wait(1.0):
        for number, conn in enumerate(list(held)):
            if number % 2:
                try:
                    conn.send(b"{")
                except OSError:
                    held.remove(conn)
                    conn.close()
    for conn in held:
        conn.close()


def soak(seconds: float, sample_every: float = 5.0, valid_clients: int = 2) -> dict:
    target = Target().start()
    stop = threading.Event()
    acked: set[str] = set()
    latencies: list = []
    errors: dict = {}
    hostile_counts: dict = {}
    held: list = []
    hook_counts: dict = {}
    threads = [threading.Thread(target=_valid, args=(target, stop, f"v{n}", acked, latencies, errors), daemon=True)
               for n in range(valid_clients)]
    threads.append(threading.Thread(target=_hostile, args=(target, stop, hostile_counts), daemon=True))
    if target.info.get("hook_socket"):
        threads.append(threading.Thread(target=_slow_and_idle, args=(target.info["hook_socket"], stop, held), daemon=True))
        threads.append(threading.Thread(target=_hook_valid, args=(target.info["hook_socket"], stop, hook_counts), daemon=True))
    samples = []
    started = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        while time.monotonic() - started < seconds:
            time.sleep(sample_every)
            now = time.monotonic()
            window = sorted(ms for at, ms in latencies if at > now - sample_every)
            samples.append({"t_s": round(now - started), "rss_mib": target.rss_mib(), "fds": target.fds(),
                            "store_mib": target.store_mib(), "valid_calls": len(window),
                            "p50_ms": round(window[len(window) // 2], 2) if window else None,
                            "p99_ms": round(window[int(len(window) * 0.99) - 1], 2) if window else None})
        pid = target.proc.pid
        target.proc.send_signal(signal.SIGKILL)   # with the traffic still running
        target.proc.wait(30)
        stop.set()
        for thread in threads:
            thread.join(timeout=40)
        acknowledged = set(acked)
        restarted = Target(data_dir=target.data_dir).start()
        try:
            db = sqlite3.connect(restarted.data_dir / "hpcpredict.sqlite")
            try:
                stored = {row[0] for row in db.execute("SELECT job_id FROM jobs WHERE source = 'outcome'")}
            finally:
                db.close()
        finally:
            restarted.stop()
    finally:
        stop.set()
        target.cleanup()
    third = max(1, len(samples) // 3)
    first, last = samples[:third], samples[-third:]

    def mean(rows, key):
        values = [r[key] for r in rows if r[key] is not None]
        return round(sum(values) / len(values), 1) if values else None

    return {
        "seconds": seconds, "killed_pid": pid, "valid_clients": valid_clients,
        "acknowledged_outcomes": len(acknowledged), "lost_after_kill9": len(acknowledged - stored),
        "valid_errors": errors, "hostile_calls": hostile_counts, "idle_or_slow_connections": 16,
        "hook_client_beside_them": hook_counts,
        "rss_mib": {"first_third": mean(first, "rss_mib"), "last_third": mean(last, "rss_mib"),
                    "max": max(s["rss_mib"] for s in samples)},
        "fds": {"first_third": mean(first, "fds"), "last_third": mean(last, "fds"), "max": max(s["fds"] for s in samples)},
        "store_mib_end": samples[-1]["store_mib"],
        "valid_p50_ms": {"first_third": mean(first, "p50_ms"), "last_third": mean(last, "p50_ms")},
        "valid_p99_ms": {"first_third": mean(first, "p99_ms"), "last_third": mean(last, "p99_ms")},
        "samples": samples,
    }
