"""Can ordinary users starve the Slurm hook? The hook's call under their load, before and after.

    python -m benchmarks run hook_fairness [--seconds 30] [--before b8c431a] [--only load scripts metrics]

Needs root (it creates throwaway users and runs each load as one of them: forked children that
``setuid``). The daemon (``hpcpredictd``, bundled models) runs as a throwaway user of its own.
The probe is the submit hook's own call: the Slurm user (``slurm``, uid 64030 on the project's
test clusters; privileged by the default ``[daemon] slurm_user``) sends job_submit.lua's
request (a 4 KiB script, argv, environment) every 100 ms with the hook's 300 ms budget
(connect, send and answer); an answer is an ``ok`` reply within the budget.

* ``load``: one user looping (closed loop, one connection) the largest request the limits of
  that version let through (before: a 4 MiB line of 110,000 inputs and 120,000 messages;
  after: a 128 KiB line at every count limit), 20 users each holding 30 idle connections
  (reconnecting when cut), one user with 8 clients sending a byte every 0.5 s;
* ``scripts``: 4 processes as the Slurm user (a user's 4 ``sbatch`` loops, each job's script
  sent by the submit hook) loop Predicts of the hostile 64 KiB scripts of
  tests/robustness/hostile_scripts.py, a distinct copy each time (the parse cache misses);
* ``metrics``: the daemon under a task limit of 512 (``prlimit --nproc=512``: RLIMIT_NPROC of
  its own uid, counting its threads; there is no systemd here to give it a TasksMax); one user
  opens TCP connections to the metrics endpoint from 64 threads and holds them (up to 5,000;
  reopening the ones closed) and from 15 s on sends bursts of 20 calls at once it may not make
  (each refused) on the local socket, one burst a second. Answered probes, the daemon's threads, whether gRPC
  health still says SERVING and whether the local socket still answers afterwards.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import pwd
import resource
import selectors
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from benchmarks.reliability.target import Target, source_of

DESCRIPTION = "the Slurm hook's call (300 ms budget) under ordinary users' load, before/after"

BUDGET_S = 0.3
HOOK_JOB = {"job": {"user": "alice", "application": "", "job_name": "run", "account": "phys", "partition": "batch"},
            "resources": {"nodes": 2, "ntasks": 64}, "time_limit_s": 7200, "argv": ["in.lj", "-v", "3"],
            "environment": {"OMP_NUM_THREADS": "1", "SLURM_JOB_NAME": "run"},
            "script": base64.b64encode(b"#!/bin/bash\n#SBATCH -N 2\nmodule load lammps\n" + b"# comment line\n" * 270
                                       + b"srun lmp -in in.lj\n").decode()}


def _line(method: str, request: dict) -> bytes:
    return json.dumps({"method": method, "request": request}, separators=(",", ":")).encode() + b"\n"


def heaviest_request(old: bool) -> bytes:
    """The costliest Predict line each version takes in (parsed in full before it is refused)."""
    base = {"job": {"application": "lmp"}, "resources": {"nodes": 1, "ntasks": 8}, "time_limit_s": 3600}
    if old:   # the request: many argv words, 110k inputs, 120k messages, within 4 MiB
        return _line("Predict", dict(base, argv=[""] * 100_000, inputs={f"k{i}": {"flag": True} for i in range(110_000)},
                                     comm={"name": "explicit", "messages": [{}] * 120_000}))
    return _line("Predict", dict(base, inputs={f"k{i}": {"text": "x" * 100} for i in range(400)},
                                 argv=["a"] * 512, environment={f"V{i}": "" for i in range(256)},
                                 comm={"name": "explicit", "messages": [{"src": 1, "dst": 2, "bytes": 3}] * 1024}))


# ------------------------------------------------------------------ load, as other uids
def _forked(user, work, *args) -> int:
    """Run ``work(*args)`` in a child process as ``user``; its pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
        work(*args)
    except BaseException:   # noqa: BLE001 - a child must never return into the parent's code
        import traceback
        traceback.print_exc()
        code = 1
    os._exit(code)


def _connect(path: str, timeout: float = 5.0):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    conn.connect(path)
    return conn


def loop_heavy(path: str, payload: bytes, until: float, out: str) -> None:
    done = 0
    while time.time() < until:
        try:
            with _connect(path, 30) as conn:
                reader = conn.makefile("rb")
                while time.time() < until:
                    conn.sendall(payload)
                    if not reader.readline():
                        break
                    done += 1
        except OSError:
            time.sleep(0.05)
    Path(out).write_text(json.dumps({"heavy_requests": done}))


def loop_scripts(path: str, first: int, until: float, out: str) -> None:
    """Predict the hostile scripts in turn, a new copy each time, as the submit hook would."""
    from tests.robustness.hostile_scripts import HOSTILE_SCRIPTS, variant

    scripts = list(HOSTILE_SCRIPTS.values())
    done = 0
    while time.time() < until:
        try:
            with _connect(path, 30) as conn:
                reader = conn.makefile("rb")
                while time.time() < until:
                    index = first + done
                    script = variant(scripts[index % len(scripts)], index)
                    conn.sendall(_line("Predict", dict(HOOK_JOB, script=base64.b64encode(script).decode())))
                    if not reader.readline():
                        break
                    done += 1
        except OSError:
            time.sleep(0.05)
    Path(out).write_text(json.dumps({f"script_requests_{first}": done}))


def hold_idle(path: str, count: int, until: float) -> None:
    """Keep ``count`` connections open, silent; reopen the ones the daemon closes."""
    selector = selectors.DefaultSelector()
    held = 0
    while time.time() < until:
        while held < count:
            try:
                conn = _connect(path, 1.0)
            except OSError:
                break
            conn.setblocking(False)
            selector.register(conn, selectors.EVENT_READ)
            held += 1
        for key, _ in selector.select(0.2):
            selector.unregister(key.fileobj)
            key.fileobj.close()
            held -= 1


def trickle(path: str, clients: int, until: float) -> None:
    """``clients`` connections each sending one byte every 0.5 s; reopened when cut off."""
    conns = [None] * clients
    while time.time() < until:
        for index in range(clients):
            try:
                if conns[index] is None:
                    conns[index] = _connect(path, 1.0)
                conns[index].send(b"{")
            except OSError:
                if conns[index] is not None:
                    conns[index].close()
                conns[index] = None
        time.sleep(0.5)


def probe(path: str, until: float, out: str) -> None:
    """The submit hook's call every 100 ms with its budget; latency of each, None = not answered."""
    payload = _line("Predict", HOOK_JOB)
    latencies, failures = [], {}
    while time.time() < until:
        started = time.monotonic()
        answer, stage = None, "connect"
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(BUDGET_S)
            conn.connect(path)
            stage = "send"
            conn.sendall(payload)
            stage = "answer"
            data = b""
            while not data.endswith(b"\n"):
                conn.settimeout(max(0.001, started + BUDGET_S - time.monotonic()))
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            conn.close()
            reply = json.loads(data) if data else {"error": "closed"}
            if reply.get("ok"):
                answer = time.monotonic() - started
            else:
                stage = f"refused: {reply.get('error')}"
        except (OSError, ValueError) as error:
            stage = f"{stage}: {type(error).__name__}"
        latencies.append(answer)
        if answer is None:
            failures[stage] = failures.get(stage, 0) + 1
        time.sleep(max(0.0, 0.1 - (time.monotonic() - started)))
    Path(out).write_text(json.dumps({"latencies": latencies, "failures": failures}))


def hold_metrics(port: int, count: int, until: float, hook: str, refused_calls: int, out: str) -> None:
    """Up to ``count`` TCP connections to the metrics port, held silent (reopened when closed), by
    64 connecting threads (a connect on this VM's loopback stalls for a second now and then);
    from 15 s on, bursts of 20 calls at once an ordinary user may not make, one a second."""
    import threading

    lock = threading.Lock()
    tally = {"held": 0, "peak": 0, "opened": 0, "failed": 0}

    def connector():
        mine = []
        while time.time() < until:
            if tally["held"] < count:
                try:
                    conn = socket.create_connection(("127.0.0.1", port), timeout=2.0)
                    conn.setblocking(False)
                    mine.append(conn)
                    with lock:
                        tally["held"] += 1
                        tally["opened"] += 1
                        tally["peak"] = max(tally["peak"], tally["held"])
                except OSError:
                    with lock:
                        tally["failed"] += 1
            else:
                time.sleep(0.2)
            for conn in selectors_ready(mine):     # closed by the server: open another
                mine.remove(conn)
                conn.close()
                with lock:
                    tally["held"] -= 1

    threads = [threading.Thread(target=connector, daemon=True) for _ in range(64)]
    for thread in threads:
        thread.start()
    codes: dict = {}
    sent = 0
    time.sleep(15.0)    # the endpoint's threads first: a burst then needs new worker threads
    while time.time() < until:
        started = time.time()
        burst = []    # 20 at once: calls in flight together, as a burst of refused calls is
        for index in range(sent, min(refused_calls, sent + 20)):
            try:
                conn = _connect(hook, 5.0)
                conn.sendall(_line("ReportOutcome", {"job_id": str(index), "state": "COMPLETED"}))
                burst.append(conn)
            except OSError as error:
                codes[type(error).__name__] = codes.get(type(error).__name__, 0) + 1
            sent += 1
        for conn in burst:
            try:
                reply = conn.makefile("rb").readline()
                code = json.loads(reply).get("code", json.loads(reply).get("error")) if reply else "closed"
            except (OSError, ValueError) as error:
                code = type(error).__name__
            conn.close()
            codes[code] = codes.get(code, 0) + 1
        time.sleep(max(0.0, 1.0 - (time.time() - started)))
    for thread in threads:
        thread.join(5)
    Path(out).write_text(json.dumps({"metrics_connections_opened": tally["opened"], "held_at_once": tally["peak"],
                                     "connect_failures": tally["failed"], "refused_calls": codes}))


def selectors_ready(conns: list) -> list:
    """The connections of ``conns`` the other end closed (or that have something to read)."""
    if not conns:
        return []
    selector = selectors.DefaultSelector()
    for conn in conns:
        selector.register(conn, selectors.EVENT_READ)
    ready = [key.fileobj for key, _ in selector.select(0)]
    selector.close()
    return ready


# ------------------------------------------------------------------ one run
def _users(count: int) -> list:
    names = [f"hpdf{uuid.uuid4().hex[:7]}" for _ in range(count)]
    for name in names:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    return [pwd.getpwnam(name) for name in names]


def _summary(probed: dict) -> dict:
    latencies = probed["latencies"]
    answered = sorted(x for x in latencies if x is not None)
    share = len(answered) / len(latencies) if latencies else 0.0
    pick = (lambda q: round(answered[min(len(answered) - 1, int(len(answered) * q))] * 1e3, 2)) if answered else None
    return {"probes": len(latencies), "answered": len(answered), "answered_pct": round(100 * share, 2),
            "p50_ms": pick(0.5) if pick else None, "p99_ms": pick(0.99) if pick else None,
            "max_ms": round(answered[-1] * 1e3, 2) if answered else None, "not_answered": probed["failures"]}


def _health(target: Target) -> str:
    try:
        with grpc.insecure_channel(f"unix:{target.info['socket']}") as channel:
            status = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status
        return health_pb2.HealthCheckResponse.ServingStatus.Name(status)
    except grpc.RpcError as error:
        return error.code().name


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Threads:"))


def run_one(scenario: str, source, daemon_user, users, seconds: float) -> dict:
    env = {"HPCPREDICT_DAEMON_METRICS": "127.0.0.1:0"}
    target = Target(source, env=env, user=daemon_user.pw_name,
                    prefix=["prlimit", "--nproc=512:512", "--"] if scenario == "metrics" else [])
    target.start()
    work = Path(tempfile.mkdtemp(prefix="hpd-fair-"))
    os.chmod(work, 0o777)
    hook = target.info["hook_socket"]
    slurm = pwd.getpwnam("slurm")
    pids = []
    try:
        until = time.time() + seconds + 3
        if scenario == "load":
            pids.append(_forked(users[0], loop_heavy, hook, heaviest_request(source is not None), until,
                                str(work / "heavy.json")))
            for user in users[1:21]:
                pids.append(_forked(user, hold_idle, hook, 30, until))
            pids.append(_forked(users[21], trickle, hook, 8, until))
        elif scenario == "scripts":
            for index in range(4):
                pids.append(_forked(slurm, loop_scripts, hook, index * 1_000_000, until, str(work / f"scripts{index}.json")))
        else:
            pids.append(_forked(users[0], hold_metrics, target.info["metrics_port"], 5000, until, hook, int(20 * seconds),
                                str(work / "metrics.json")))
        time.sleep(3)   # the load in place before the first probe
        pids.append(_forked(slurm, probe, hook, until, str(work / "probe.json")))
        threads, running = 0, set(pids)
        while running:
            running = {pid for pid in running if os.waitpid(pid, os.WNOHANG) == (0, 0)}
            if target.proc.poll() is None:
                threads = max(threads, _threads(target.proc.pid))
            time.sleep(0.5)
        result = {"probe": _summary(json.loads((work / "probe.json").read_text())),
                  "daemon_threads_peak": threads,
                  "health_after": _health(target), "daemon_alive": target.proc.poll() is None}
        for name in ("heavy.json", "metrics.json", *(f"scripts{index}.json" for index in range(4))):
            if (work / name).exists():
                result.update(json.loads((work / name).read_text()))
        time.sleep(1)
        _forked(slurm, probe, hook, time.time() + 2, str(work / "after.json"))
        os.wait()
        result["probe_after_load"] = _summary(json.loads((work / "after.json").read_text()))
        log = target.log()
        result["log_loop_failed"] = "local socket loop failed" in log or "local socket cannot go on" in log
        result["log_cannot_start_thread"] = "can't start new thread" in log
        return result
    finally:
        for pid in pids:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        target.cleanup()
        shutil.rmtree(work, ignore_errors=True)


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="hook_fairness")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--before", default="b8c431a", help="commit of the 'before' column ('' = none)")
    parser.add_argument("--only", nargs="*", default=["load", "metrics"])
    options = parser.parse_args(args)
    users = _users(23)
    daemon_user = users.pop()
    before = source_of(options.before) if options.before else None
    results: dict = {"seconds": options.seconds, "budget_ms": BUDGET_S * 1e3, "before_commit": options.before}
    try:
        for scenario in options.only:
            for column, source in (("before", before), ("after", None)):
                if column == "before" and before is None:
                    continue
                results[f"{scenario}_{column}"] = run_one(scenario, source, daemon_user, users, options.seconds)
    finally:
        for user in users + [daemon_user]:
            subprocess.run(["userdel", user.pw_name], capture_output=True)
        if before is not None:
            shutil.rmtree(before, ignore_errors=True)
    results["headline"] = {key: {"answered_pct": value["probe"]["answered_pct"], "p99_ms": value["probe"]["p99_ms"],
                                 "after_load_pct": value["probe_after_load"]["answered_pct"],
                                 "health": value["health_after"]}
                           for key, value in results.items() if isinstance(value, dict) and "probe" in value}
    return results
