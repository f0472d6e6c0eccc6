"""Predict under load: the real daemon, real models, the Unix socket, 1/8/32/128 clients.

    nice -n 10 .venv/bin/python -m benchmarks.load.loadgen --requests 4000 --seconds 20 \\
        --json benchmarks/load/results.json

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


_sent = 0  # payloads used so far (each is sent once)


async def run_phase(channel, kind: str, clients: int, total: int, seconds: float, payloads: list[bytes]) -> dict:
    predict = channel.unary_unary("/hpcpredict.v1.Predictor/Predict", request_serializer=None,
                                  response_deserializer=pb.Estimate.FromString)
    health = health_pb2_grpc.HealthStub(channel)
    check = health_pb2.HealthCheckRequest()
    latencies: list[float] = []
    codes: dict[str, int] = {}
    issued = 0
    deadline = time.perf_counter() + seconds

    async def client():
        nonlocal issued
        global _sent
        while issued < total and time.perf_counter() < deadline:
            issued += 1
            index = _sent
            _sent += kind == "predict"
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
    wall = time.perf_counter() - began
    latencies.sort()
    return {"kind": kind, "clients": clients, "calls": sum(codes.values()), "codes": codes, "wall_s": wall,
            "ok_per_s": codes.get("OK", 0) / wall,
            "client_p50_ms": percentile(latencies, 0.50) * 1e3, "client_p95_ms": percentile(latencies, 0.95) * 1e3,
            "client_p99_ms": percentile(latencies, 0.99) * 1e3}


async def measure(socket_path: str, metrics_port: int, payloads: list[bytes], args) -> list[dict]:
    results = []
    async with grpc.aio.insecure_channel(f"unix:{socket_path}") as channel:
        await run_phase(channel, "predict", 4, min(400, args.requests), args.seconds, payloads)  # warm-up
        for clients in args.levels:
            for kind in ("health", "predict"):
                before = scrape_histogram(metrics_port, "Predict")
                row = await run_phase(channel, kind, clients, args.requests, args.seconds, payloads)
                if kind == "predict":
                    after = scrape_histogram(metrics_port, "Predict")
                    for q in (0.50, 0.95, 0.99):
                        row[f"server_p{int(q * 100)}_ms"] = histogram_quantile(q, before, after) * 1e3
                results.append(row)
                print(json.dumps(row), flush=True)
    return results


def table(results: list[dict]) -> str:
    lines = ["| clients | call | calls | OK/s | client p50 / p95 / p99 ms | server p50 / p95 / p99 ms | not OK |",
             "|---:|---|---:|---:|---|---|---|"]
    for r in results:
        server = (f"{r['server_p50_ms']:.2f} / {r['server_p95_ms']:.2f} / {r['server_p99_ms']:.2f}"
                  if "server_p50_ms" in r else "—")
        bad = ", ".join(f"{k} {v}" for k, v in r["codes"].items() if k != "OK") or "0"
        lines.append(f"| {r['clients']} | {r['kind']} | {r['calls']} | {r['ok_per_s']:.0f} | "
                     f"{r['client_p50_ms']:.2f} / {r['client_p95_ms']:.2f} / {r['client_p99_ms']:.2f} | {server} | {bad} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=4000, help="calls per phase (upper bound)")
    parser.add_argument("--seconds", type=float, default=20.0, help="time per phase (upper bound)")
    parser.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    parser.add_argument("--trace", type=Path, default=None, help="SWF trace for the history (default: hpc2n subset)")
    parser.add_argument("--daemon-env", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for the daemon, e.g. HPCPREDICT_DAEMON_WORKERS=2")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    extra_env = dict(item.split("=", 1) for item in args.daemon_env)
    data_dir = Path(tempfile.mkdtemp(prefix="hpd-load-"))
    proc = None
    try:
        world = build_world(data_dir, **({"trace": args.trace} if args.trace else {}))
        payloads = requests(world, args.requests * len(args.levels) + 400)  # no payload is sent twice
        proc, info = start_daemon(data_dir, extra_env)
        results = asyncio.run(measure(info["socket"], info["metrics_port"], payloads, args))
        print(table(results))
        if args.json:
            meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg": os.getloadavg(),
                    "cpus": os.cpu_count(), "history_jobs": world["history_jobs"], "runtime_model": world["runtime"],
                    "walltime_model": world["walltime"], "requests": args.requests, "seconds": args.seconds,
                    "daemon_env": extra_env}
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
