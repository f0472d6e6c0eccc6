"""Open-loop load on the real daemon: requests arrive at a fixed rate whatever the answers do.

A closed loop (N clients, each waiting for its answer) slows down with the server and so hides
queueing; Slurm's submissions do not wait for each other. Here request ``i`` is due at
``start + i / rate`` and its latency is counted from that due time to its answer, so a stall
shows up in every request that arrived during it (no coordinated omission).

Two paths:

* ``hook``: the daemon's line-JSON hook socket, one connection per request, as ``job_submit.lua``
  and the prolog/epilog client do (connect, one line, one reply line, close);
* ``grpc``: Predict through grpcio on the public Unix socket, one channel (``grpc.aio``).

The daemon runs as a subprocess (``hpcpredictd``) on a data directory filled by
:func:`benchmarks.load.world.build_world`: a real trace ingested as history, the walltime model
trained on it, and the LAMMPS runtime model; half the requests are LAMMPS jobs with inputs,
half are the trace users' jobs, every script different.
"""
from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import grpc
from google.protobuf import json_format

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

PREDICT = "/hpcpredict.v1.Predictor/Predict"


def start_daemon(data_dir: Path, extra_env: dict | None = None, timeout: float = 90.0) -> tuple[subprocess.Popen, dict]:
    """``hpcpredictd`` on ``data_dir`` (hook socket on); returns the process and its runtime info."""
    env = {**os.environ, "HPCPREDICT_DATA_DIR": str(data_dir), "HPCPREDICT_DAEMON_LOG_LEVEL": "WARNING",
           **(extra_env or {})}
    log = open(data_dir / "daemon.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "hpcpredict.daemon.server"], env=env, stdout=log, stderr=log)
    info_path = data_dir / "hpcpredictd.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited: {(data_dir / 'daemon.log').read_text()}")
        if info_path.exists():
            return proc, json.loads(info_path.read_text())
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("daemon did not start")


def stop_daemon(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (all CPUs, from /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = (fields + [0] * 7)[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def hook_lines(payloads: list[bytes]) -> list[bytes]:
    """The hook socket's request lines for serialized JobRequests (proto3 JSON, as the hooks send)."""
    lines = []
    for payload in payloads:
        request = json_format.MessageToDict(pb.JobRequest.FromString(payload), preserving_proto_field_name=True)
        lines.append(json.dumps({"method": "Predict", "request": request}, separators=(",", ":")).encode() + b"\n")
    return lines


def percentile(ordered: list[float], q: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _hook_open_loop(path: str, lines: list[bytes], rate: float, seconds: float, timeout: float) -> dict:
    """The hook path's open loop, on plain sockets: one thread, one ``select(2)``.

    A submission's hook is a few system calls in slurmctld (lua-socket); a Python client on
    asyncio's streams spent ~0.4 ms of CPU per request on this 2-core machine and sent the next
    request late while it did. Here a request costs the client a connect, a send, a select and
    a read, and each leaves at its due time to within select's microsecond sleep. A connect to
    a full listen backlog fails at once (EAGAIN on a Unix socket) and is counted under its
    exception's name, ``BlockingIOError``.
    """
    count = max(1, int(rate * seconds))
    latencies: list[float] = []
    from_send: list[float] = []
    codes: dict[str, int] = {}
    selector = selectors.SelectSelector()   # microsecond timeouts; a few sockets open at a time
    open_calls: dict[socket.socket, list] = {}   # socket -> [due, sent, reply bytes]
    late = 0.0

    def finish(sock: socket.socket, code: str) -> None:
        due, sent, _ = open_calls.pop(sock)
        selector.unregister(sock)
        sock.close()
        _count(code, due, sent, time.monotonic(), codes, latencies, from_send)

    start = time.monotonic() + 0.2
    index = 0
    while index < count or open_calls:
        now = time.monotonic()
        while index < count and start + index / rate <= now:
            due = start + index / rate
            late = max(late, now - due)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sent = time.monotonic()
            try:
                sock.settimeout(timeout)
                sock.connect(path)
                sock.setblocking(False)
                sock.send(lines[index % len(lines)])
            except OSError as error:
                sock.close()
                codes[type(error).__name__] = codes.get(type(error).__name__, 0) + 1
            else:
                open_calls[sock] = [due, sent, b""]
                selector.register(sock, selectors.EVENT_READ)
            index += 1
            now = time.monotonic()
        wait = start + index / rate - time.monotonic() if index < count else 0.05
        for key, _ in selector.select(max(0.0, wait)) if open_calls else ():
            sock = key.fileobj
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError as error:
                finish(sock, type(error).__name__)
                continue
            state = open_calls[sock]
            state[2] += data
            if state[2].endswith(b"\n"):
                answer = json.loads(state[2])
                finish(sock, "OK" if answer.get("ok") else str(answer.get("code") or answer.get("error")))
            elif not data:
                finish(sock, "NO_REPLY")
        if not open_calls and index < count:
            time.sleep(max(0.0, start + index / rate - time.monotonic()))
        now = time.monotonic()
        for sock in [s for s, (due, sent, _) in open_calls.items() if now - sent > timeout]:
            finish(sock, "TIMEOUT")
    selector.close()
    return _summary(rate, count, codes, latencies, from_send, time.monotonic() - start, late)


async def _open_loop(call, items: list, rate: float, seconds: float, timeout: float) -> dict:
    """Issue ``call(item)`` at ``rate`` per second for ``seconds``; latency from each due time."""
    count = max(1, int(rate * seconds))
    latencies: list[float] = []
    from_send: list[float] = []
    codes: dict[str, int] = {}
    loop = asyncio.get_running_loop()
    late = 0.0

    async def one(index: int, due: float):
        sent = loop.time()
        try:
            code = await asyncio.wait_for(call(items[index % len(items)]), timeout)
        except asyncio.TimeoutError:
            code = "TIMEOUT"
        except grpc.aio.AioRpcError as error:
            code = error.code().name
        except OSError as error:
            code = type(error).__name__
        _count(code, due, sent, loop.time(), codes, latencies, from_send)

    start = loop.time() + 0.2
    tasks = []
    for index in range(count):
        due = start + index / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            late = max(late, -delay)
        tasks.append(asyncio.ensure_future(one(index, due)))
    await asyncio.gather(*tasks)
    return _summary(rate, count, codes, latencies, from_send, loop.time() - start, late)


def _count(code: str, due: float, sent: float, done: float, codes: dict, latencies: list, from_send: list) -> None:
    """One answered request: its code counted, an OK's latency from its due time and its send."""
    codes[code] = codes.get(code, 0) + 1
    if code == "OK":
        latencies.append(done - due)
        from_send.append(done - sent)


def _summary(rate: float, count: int, codes: dict, latencies: list[float], from_send: list[float], wall: float,
             late: float) -> dict:
    latencies.sort()
    from_send.sort()
    # p50/p99: from each request's due time (what an arriving submission waits, client delays
    # included); *_from_send_ms: from the moment the client got to send it (the daemon's share).
    return {"rate": rate, "requests": count, "codes": codes, "wall_s": wall, "ok_per_s": codes.get("OK", 0) / wall,
            "p50_ms": percentile(latencies, 0.50) * 1e3, "p99_ms": percentile(latencies, 0.99) * 1e3,
            "max_ms": (latencies[-1] if latencies else float("nan")) * 1e3,
            "p50_from_send_ms": percentile(from_send, 0.50) * 1e3, "p99_from_send_ms": percentile(from_send, 0.99) * 1e3,
            "client_max_lag_ms": late * 1e3}


def run_rate(kind: str, target: str, items: list, rate: float, seconds: float, daemon_pid: int,
             timeout: float = 10.0) -> dict:
    """One open-loop phase; adds the daemon's CPU per call and the machine's other load."""
    async def go():
        async with grpc.aio.insecure_channel(f"unix:{target}") as channel:
            predict = channel.unary_unary(PREDICT, request_serializer=None, response_deserializer=None)

            async def call(payload):
                await predict(payload, timeout=timeout)
                return "OK"
            await call(items[0])   # connect before the clock starts
            return await _open_loop(call, items, rate, seconds, timeout)

    daemon_before, own_before, busy_before = cpu_seconds(daemon_pid), cpu_seconds(os.getpid()), machine_busy_seconds()
    if kind == "hook":
        row = _hook_open_loop(target, items, rate, seconds, timeout)
    else:
        # select(2) sleeps to the microsecond; epoll, asyncio's default, rounds every wait up to
        # the next millisecond, which sent each request up to 1 ms after its due time.
        with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(selectors.SelectSelector())) as runner:
            row = runner.run(go())
    daemon_cpu = cpu_seconds(daemon_pid) - daemon_before
    own_cpu = cpu_seconds(os.getpid()) - own_before
    row["daemon_cpu_us_per_call"] = daemon_cpu / max(row["requests"], 1) * 1e6
    row["daemon_cores"] = daemon_cpu / row["wall_s"]
    row["client_cores"] = own_cpu / row["wall_s"]
    # What else the shared machine ran meanwhile (other helpers' tests and builds), in cores.
    row["other_cores"] = max(0.0, machine_busy_seconds() - busy_before - daemon_cpu - own_cpu) / row["wall_s"]
    row["loadavg_1min"] = os.getloadavg()[0]
    return row


def crossing_rate(rows: list[dict], limit_ms: float) -> dict:
    """Where p99 first exceeds ``limit_ms`` as the rate rises: interpolated between the two
    measured rates around it; ``below``/``above`` when it happens outside the measured range.
    A rate whose answers were not (nearly) all OK counts as exceeding."""
    rows = sorted(rows, key=lambda r: r["rate"])

    def p99(row):
        return row["p99_ms"] if row["codes"].get("OK", 0) >= 0.99 * row["requests"] else float("inf")
    below = None
    for row in rows:
        if p99(row) > limit_ms:
            if below is None:
                return {"rate": None, "note": f"p99 above {limit_ms:g} ms already at the lowest rate, {row['rate']:g}/s"}
            if p99(row) == float("inf"):
                return {"rate": row["rate"], "note": f"more than 1 % refused or failed at {row['rate']:g}/s"}
            low_rate, low_p99 = below
            rate = low_rate + (row["rate"] - low_rate) * (limit_ms - low_p99) / (p99(row) - low_p99)
            return {"rate": rate, "note": f"between {low_rate:g} and {row['rate']:g}/s"}
        below = (row["rate"], p99(row))
    return {"rate": None, "note": f"p99 stayed below {limit_ms:g} ms up to {rows[-1]['rate']:g}/s"}


def median_row(rows: list[dict]) -> dict:
    """One rate's phases summed up: request counts added, every timing the median of the phases."""
    out = {"rate": rows[0]["rate"], "phases": len(rows), "requests": sum(r["requests"] for r in rows), "codes": {}}
    for row in rows:
        for code, count in row["codes"].items():
            out["codes"][code] = out["codes"].get(code, 0) + count
    for key in ("p50_ms", "p99_ms", "max_ms", "p50_from_send_ms", "p99_from_send_ms", "client_max_lag_ms",
                "daemon_cpu_us_per_call", "daemon_cores", "client_cores", "other_cores", "loadavg_1min", "ok_per_s"):
        out[key] = statistics.median(r[key] for r in rows)
    return out
