"""gRPC Python's own per-call cost: thread-pool server vs asyncio server, same calls.

    nice -n 10 .venv/bin/python -m benchmarks.load.floor --seconds 4 --clients 1 8 32 --procs 1 \\
        --work-us 300 --server-cpu 1 --json benchmarks/load/floor-results.json

Starts a server with the standard health service and ``/bench.Work/Run`` (raw bytes echoed
after ``--work-us`` of pure-Python CPU, a stand-in for Predict) — ``grpc.server`` with a
thread pool (what ``hpcpredictd`` uses) or ``grpc.aio.server`` — on a Unix socket in a child
process, then drives it with ``--procs`` client processes (each one ``grpc.aio`` channel with
``clients / procs`` concurrent callers) for ``--seconds``. Reports calls/s, latency and the
server's CPU time per call (from /proc). ``--server-cpu N`` pins the server to CPU N and the
clients to the other CPUs, so a many-threaded server gets no larger share of a busy machine
than a single-threaded one. Several client processes tell whether one client is the limit.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import tempfile
import time
from concurrent import futures


def _spin(work_us: float) -> None:
    """Pure-Python CPU work standing in for a handler (holds the GIL, like Predict does)."""
    end = time.perf_counter() + work_us * 1e-6
    while time.perf_counter() < end:
        pass


def work_handler(grpc, kind: str, work_us: float):
    """/bench.Work/Run: raw bytes in and out, ``work_us`` of CPU in between."""
    if kind == "threads":
        def run(request, context):
            _spin(work_us)
            return request
    else:
        async def run(request, context):
            _spin(work_us)
            return request
    return grpc.method_handlers_generic_handler("bench.Work", {"Run": grpc.unary_unary_rpc_method_handler(run)})


def serve(kind: str, socket_path: str, ready, workers: int, max_concurrent: int, work_us: float = 0.0,
          cpu: int = -1) -> None:
    if cpu >= 0:   # pinned: a multi-threaded server gets no more CPU share than a single-threaded one
        os.sched_setaffinity(0, {cpu})
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    servicer = health.HealthServicer() if kind == "threads" else health.aio.HealthServicer()
    if kind == "threads":
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), maximum_concurrent_rpcs=max_concurrent)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        server.add_generic_rpc_handlers((work_handler(grpc, kind, work_us),))
        server.add_insecure_port(f"unix:{socket_path}")
        server.start()
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        ready.set()
        server.wait_for_termination()
        return

    async def main():
        server = grpc.aio.server(maximum_concurrent_rpcs=max_concurrent)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
        server.add_generic_rpc_handlers((work_handler(grpc, kind, work_us),))
        server.add_insecure_port(f"unix:{socket_path}")
        await server.start()
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        ready.set()
        await server.wait_for_termination()
    asyncio.run(main())


def client_process(socket_path: str, concurrency: int, start_at: float, seconds: float, queue, work: bool,
                   avoid_cpu: int = -1) -> None:
    if avoid_cpu >= 0 and os.cpu_count() > 1:
        os.sched_setaffinity(0, set(range(os.cpu_count())) - {avoid_cpu})
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async def run():
        latencies, codes = [], {}
        async with grpc.aio.insecure_channel(f"unix:{socket_path}") as channel:
            if work:   # the CPU-bound stand-in; 100 bytes each way, like a small Predict
                call, request = channel.unary_unary("/bench.Work/Run"), b"x" * 100
            else:
                call, request = health_pb2_grpc.HealthStub(channel).Check, health_pb2.HealthCheckRequest()
            await call(request, timeout=10)
            await asyncio.sleep(max(0.0, start_at - time.time()))
            deadline = time.perf_counter() + seconds

            async def caller():
                while time.perf_counter() < deadline:
                    begin = time.perf_counter()
                    try:
                        await call(request, timeout=30)
                        code = "OK"
                        latencies.append(time.perf_counter() - begin)
                    except grpc.aio.AioRpcError as error:
                        code = error.code().name
                    codes[code] = codes.get(code, 0) + 1
            await asyncio.gather(*(caller() for _ in range(concurrency)))
        return latencies, codes
    queue.put(asyncio.run(run()))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drive(socket_path: str, clients: int, procs: int, seconds: float, server_pid: int, work: bool = False,
          server_cpu: int = -1) -> dict:
    """``clients`` concurrent callers spread over ``procs`` processes; merged results."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    start_at = time.time() + 1.5 + 0.3 * procs   # every process connected before the clock starts
    shares = [clients // procs + (i < clients % procs) for i in range(procs)]
    children = [context.Process(target=client_process,
                                args=(socket_path, share, start_at, seconds, queue, work, server_cpu))
                for share in shares if share]
    for child in children:
        child.start()
    time.sleep(max(0.0, start_at - time.time()))
    cpu_before = cpu_seconds(server_pid)
    latencies, codes = [], {}
    for index, _ in enumerate(children):
        part, part_codes = queue.get(timeout=seconds + 60)
        if index == 0:
            cpu_used = cpu_seconds(server_pid) - cpu_before
        latencies += part
        for code, count in part_codes.items():
            codes[code] = codes.get(code, 0) + count
    for child in children:
        child.join()
    latencies.sort()

    def q(p):
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1e3 if latencies else float("nan")
    calls = sum(codes.values())
    return {"clients": clients, "procs": len(children), "ok_per_s": codes.get("OK", 0) / seconds, "codes": codes,
            "p50_ms": q(0.5), "p99_ms": q(0.99), "server_cpu_us_per_call": cpu_used / max(calls, 1) * 1e6}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", nargs="+", default=["threads", "aio"], choices=["threads", "aio"])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--max-concurrent", type=int, default=256)
    parser.add_argument("--work-us", type=float, default=0.0,
                        help="also call a handler that burns this much Python CPU per call (0: health only)")
    parser.add_argument("--server-cpu", type=int, default=-1,
                        help="pin the server to this CPU and the clients to the others (-1: no pinning)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    context = multiprocessing.get_context("spawn")
    for kind in args.servers:
        with tempfile.TemporaryDirectory() as tmp:
            socket_path = os.path.join(tmp, "floor.sock")
            ready = context.Event()
            server = context.Process(target=serve, daemon=True,
                                     args=(kind, socket_path, ready, args.workers, args.max_concurrent,
                                           args.work_us, args.server_cpu))
            server.start()
            ready.wait(30)
            try:
                for clients in args.clients:
                    for procs in args.procs:
                        for call in ("health", "work") if args.work_us else ("health",):
                            row = {"server": kind, "call": call,
                                   **drive(socket_path, clients, min(procs, clients), args.seconds, server.pid,
                                           call == "work", args.server_cpu),
                                   "loadavg": os.getloadavg()[0]}
                            rows.append(row)
                            print(json.dumps(row), flush=True)
            finally:
                server.terminate()
                server.join()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
