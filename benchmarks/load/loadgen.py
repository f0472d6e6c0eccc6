"""Predict under load: the real daemon, real models, the Unix socket, 1/8/32/128 clients.

    nice -n 10 .venv/bin/python -m benchmarks.load.loadgen --requests 4000 --seconds 15 \\
        --daemon-cpu 1 --daemon-env HPCPREDICT_DAEMON_WORKERS=2 --json benchmarks/load/results.json

``--daemon-cpu N`` pins the daemon to CPU N (``[daemon] cpu_affinity``, env
``HPCPREDICT_DAEMON_CPU_AFFINITY``) and the load generator to the other CPUs; leave it out for
the unpinned daemon. ``--client-procs N`` splits the clients over N processes (is the one
Python client the bottleneck?). Each row also gives the daemon's CPU time per call (from
/proc), which a busy machine changes less than it changes calls/s, and the other work the
machine ran meanwhile, in cores (busy time from /proc/stat minus daemon and load generator):
on this 2-vCPU VM, work on the *other* CPU still slows the pinned daemon by 10–40 %.

Starts ``hpcpredictd`` as a subprocess on a fresh data directory filled by
:func:`benchmarks.load.world.build_world` (real trace history + a published LAMMPS runtime
model), then for each concurrency level runs ``--requests`` Predict calls (or stops after
``--seconds``, whichever comes first) from that many concurrent clients on ONE channel
(``grpc.aio``, one process), and the same number of bare health checks on the same channel as
the floor. Client-side latency is timed around each call; server-side latency is read from
the daemon's own ``hpcpredict_request_seconds`` histogram (difference of two scrapes,
quantiles interpolated inside buckets as Prometheus' ``histogram_quantile`` does).
Unix socket only: nothing listens on the network except the metrics endpoint on 127.0.0.1.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

from benchmarks.load.world import build_world, requests

LEVELS = (1, 8, 32, 128)


def start_daemon(data_dir: Path, extra_env: dict | None = None, timeout: float = 60.0) -> tuple[subprocess.Popen, dict]:
    socket_path = data_dir / "hpcpredictd.sock"
    env = {**os.environ, "HPCPREDICT_DATA_DIR": str(data_dir), "HPCPREDICT_DAEMON_HOOK_SOCKET": "",
           "HPCPREDICT_DAEMON_LOG_LEVEL": "WARNING", **(extra_env or {})}
    log = open(data_dir / "daemon.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "hpcpredict.daemon.server", "--socket", str(socket_path)],
                            env=env, stdout=log, stderr=log)
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


def scrape_histogram(port: int, method: str) -> dict[float, float]:
    """Cumulative bucket counts {upper bound: count} of the server-side latency of ``method``."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "hpcpredict_request_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket") and sample.labels.get("method") == method:
                buckets[float(sample.labels["le"])] = sample.value
    return buckets


def histogram_quantile(q: float, before: dict, after: dict) -> float:
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1]
    if total <= 0:
        return float("nan")
    rank = q * total
    previous_bound, previous_count = 0.0, 0.0
    for bound, count in zip(bounds, counts):
        if count >= rank:
            if bound == float("inf"):
                return previous_bound
            width = count - previous_count
            return previous_bound + (bound - previous_bound) * ((rank - previous_count) / width if width else 1.0)
        previous_bound, previous_count = bound, count
    return bounds[-2]


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc: the daemon's cost per
    call, which a busy machine changes much less than it changes wall-clock throughput."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine so far (all CPUs, from /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


async def run_phase(channel, kind: str, clients: int, total: int, seconds: float, payloads: list[bytes],
                    start_at: float = 0.0) -> dict:
    """``clients`` concurrent callers on one channel; ``total`` calls or ``seconds``, whichever first.

    Each Predict payload is sent once (``payloads`` holds at least ``total``)."""
    predict = channel.unary_unary("/hpcpredict.v1.Predictor/Predict", request_serializer=None,
                                  response_deserializer=pb.Estimate.FromString)
    health = health_pb2_grpc.HealthStub(channel)
    check = health_pb2.HealthCheckRequest()
    latencies: list[float] = []
    codes: dict[str, int] = {}
    issued = 0
    await asyncio.sleep(max(0.0, start_at - time.time()))
    deadline = time.perf_counter() + seconds

    async def client():
        nonlocal issued
        while issued < total and time.perf_counter() < deadline:
            index = issued
            issued += 1
            start = time.perf_counter()
            try:
                if kind == "predict":
                    await predict(payloads[index % len(payloads)], timeout=30)
                else:
                    await health.Check(check, timeout=30)
                code = "OK"
            except grpc.aio.AioRpcError as error:
                code = error.code().name
            elapsed = time.perf_counter() - start
            codes[code] = codes.get(code, 0) + 1
            if code == "OK":
                latencies.append(elapsed)

    began = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return {"latencies": latencies, "codes": codes, "wall_s": time.perf_counter() - began}


def _avoid_cpu(cpu: int) -> None:
    """Keep this (client) process off the daemon's CPU."""
    if cpu >= 0 and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, set(range(os.cpu_count())) - {cpu})


def _phase_in_process(socket_path: str, kind: str, clients: int, total: int, seconds: float,
                      payloads: list[bytes], start_at: float) -> dict:
    """One client process's share of a phase (its own channel, connected before ``start_at``)."""
    async def go():
        async with grpc.aio.insecure_channel(f"unix:{socket_path}") as channel:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            return await run_phase(channel, kind, clients, total, seconds, payloads, start_at)
    return asyncio.run(go())


def merge(kind: str, clients: int, parts: list[dict]) -> dict:
    latencies = sorted(x for part in parts for x in part["latencies"])
    codes: dict[str, int] = {}
    for part in parts:
        for code, count in part["codes"].items():
            codes[code] = codes.get(code, 0) + count
    wall = max(part["wall_s"] for part in parts)
    return {"kind": kind, "clients": clients, "calls": sum(codes.values()), "codes": codes, "wall_s": wall,
            "ok_per_s": codes.get("OK", 0) / wall,
            "client_p50_ms": percentile(latencies, 0.50) * 1e3, "client_p95_ms": percentile(latencies, 0.95) * 1e3,
            "client_p99_ms": percentile(latencies, 0.99) * 1e3}


def measure(socket_path: str, metrics_port: int, daemon_pid: int, payloads: list[bytes], args) -> list[dict]:
    """Every level × (health, predict), with ``args.client_procs`` client processes per phase."""
    import multiprocessing

    results = []
    procs = max(1, args.client_procs)
    pool = (multiprocessing.get_context("spawn").Pool(procs, initializer=_avoid_cpu, initargs=(args.daemon_cpu,))
            if procs > 1 else None)
    used = 0

    def phase(kind: str, clients: int, total: int) -> dict:
        nonlocal used
        n = min(procs, clients)
        shares = [clients // n + (i < clients % n) for i in range(n)]
        totals = [total // n + (i < total % n) for i in range(n)]
        chunks = []
        for share_total in totals:   # Predict payloads: each sent once
            chunks.append(payloads[used:used + share_total] if kind == "predict" else [])
            used += share_total if kind == "predict" else 0
        start_at = time.time() + (0.3 if pool is None else 1.0)
        jobs = [(socket_path, kind, shares[i], totals[i], args.seconds, chunks[i], start_at) for i in range(n)]
        if pool is None:
            parts = [_phase_in_process(*jobs[0])]
        else:
            parts = pool.starmap(_phase_in_process, jobs)
        return merge(kind, clients, parts)

    try:
        phase("predict", 4, min(400, args.requests))   # warm-up
        for clients in args.levels:
            for kind in ("health", "predict"):
                before = scrape_histogram(metrics_port, "Predict")
                cpu_before = cpu_seconds(daemon_pid)
                own_before, (busy_before, steal_before) = cpu_seconds(os.getpid()), machine_busy_seconds()
                row = phase(kind, clients, args.requests)
                daemon_cpu = cpu_seconds(daemon_pid) - cpu_before
                busy, steal = machine_busy_seconds()
                row["daemon_cpu_us_per_call"] = daemon_cpu / max(row["calls"], 1) * 1e6
                # Other work on the machine during the phase, in cores: what this shared VM ran
                # beside the daemon and the load generator (it slows both; see benchmarks/README).
                row["other_cores"] = max(0.0, (busy - busy_before) - daemon_cpu
                                         - (cpu_seconds(os.getpid()) - own_before)) / row["wall_s"]
                row["steal_cores"] = (steal - steal_before) / row["wall_s"]
                row["loadavg_1min"] = os.getloadavg()[0]
                row["client_procs"] = min(procs, clients)
                if kind == "predict":
                    after = scrape_histogram(metrics_port, "Predict")
                    for q in (0.50, 0.95, 0.99):
                        row[f"server_p{int(q * 100)}_ms"] = histogram_quantile(q, before, after) * 1e3
                results.append(row)
                print(json.dumps(row), flush=True)
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    return results


def table(results: list[dict]) -> str:
    lines = ["| clients | call | calls | OK/s | client p50 / p95 / p99 ms | server p50 / p95 / p99 ms "
             "| daemon CPU µs/call | other work (cores) | not OK |",
             "|---:|---|---:|---:|---|---|---:|---:|---|"]
    for r in results:
        server = (f"{r['server_p50_ms']:.2f} / {r['server_p95_ms']:.2f} / {r['server_p99_ms']:.2f}"
                  if "server_p50_ms" in r else "—")
        bad = ", ".join(f"{k} {v}" for k, v in r["codes"].items() if k != "OK") or "0"
        lines.append(f"| {r['clients']} | {r['kind']} | {r['calls']} | {r['ok_per_s']:.0f} | "
                     f"{r['client_p50_ms']:.2f} / {r['client_p95_ms']:.2f} / {r['client_p99_ms']:.2f} | {server} | "
                     f"{r.get('daemon_cpu_us_per_call', float('nan')):.0f} | {r.get('other_cores', float('nan')):.2f} | {bad} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000, help="calls per phase (upper bound)")
    parser.add_argument("--seconds", type=float, default=20.0, help="time per phase (upper bound)")
    parser.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    parser.add_argument("--trace", type=Path, default=None, help="SWF trace for the history (default: hpc2n subset)")
    parser.add_argument("--daemon-env", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for the daemon, e.g. HPCPREDICT_DAEMON_WORKERS=2")
    parser.add_argument("--client-procs", type=int, default=1,
                        help="client processes per phase (each one channel; clients split between them)")
    parser.add_argument("--daemon-cpu", type=int, default=-1,
                        help="pin the daemon to this CPU ([daemon] cpu_affinity) and the clients to the others "
                             "(-1: no pinning)")
    parser.add_argument("--runtime-learner", choices=("extra-trees", "ann"), default="extra-trees",
                        help="the LAMMPS runtime model served (ann: what CV picks for this data)")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    extra_env = dict(item.split("=", 1) for item in args.daemon_env)
    if args.daemon_cpu >= 0:
        extra_env["HPCPREDICT_DAEMON_CPU_AFFINITY"] = str(args.daemon_cpu)
    _avoid_cpu(args.daemon_cpu)
    data_dir = Path(tempfile.mkdtemp(prefix="hpd-load-"))
    proc = None
    try:
        world = build_world(data_dir, learner=args.runtime_learner, **({"trace": args.trace} if args.trace else {}))
        payloads = requests(world, args.requests * len(args.levels) + 400)  # no payload is sent twice
        proc, info = start_daemon(data_dir, extra_env)
        results = measure(info["socket"], info["metrics_port"], info["pid"], payloads, args)
        print(table(results))
        if args.json:
            meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg": os.getloadavg(),
                    "cpus": os.cpu_count(), "history_jobs": world["history_jobs"], "runtime_model": world["runtime"],
                    "walltime_model": world["walltime"], "requests": args.requests, "seconds": args.seconds,
                    "daemon_env": extra_env, "client_procs": args.client_procs,
                    "daemon_cpu": args.daemon_cpu, "argv": sys.argv[1:]}
            args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
