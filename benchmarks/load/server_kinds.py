"""Thread-pool vs asyncio gRPC server with the REAL Predict handler (not a stand-in).

    .venv/bin/python -m benchmarks.load.server_kinds --order threads aio threads aio --seconds 6

``floor.py`` compared the two server kinds with a spinning stand-in handler; this runs the
daemon's own servicer (world of :func:`benchmarks.load.world.build_world`, ANN runtime model)
behind ``/bench.Work/Run`` (serialized JobRequest in, serialized Estimate out) in a child
process pinned to the last CPU, driven by one ``grpc.aio`` client process on the other CPUs at
8 and 32 concurrent callers. Prints calls/s, the server's CPU µs per call and client latency.
Run the kinds alternately: on a shared machine only neighbouring runs compare.
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
from pathlib import Path

from benchmarks.load.floor import cpu_seconds


def serve(kind: str, socket_path: str, data_dir: str, ready, workers: int, cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    import grpc

    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.server import create_daemon
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    config = load_config(None, environ={"HPCPREDICT_DATA_DIR": data_dir, "HPCPREDICT_DAEMON_HOOK_SOCKET": ""})
    daemon = create_daemon(config)
    daemon.engine.start()
    servicer, parse = daemon.servicer, pb.JobRequest.FromString

    def predict(request: bytes, context) -> bytes:
        return servicer.Predict(parse(request), context).SerializeToString()

    if kind == "threads":
        handler = grpc.unary_unary_rpc_method_handler(predict)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers), maximum_concurrent_rpcs=256)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Work", {"Run": handler}),))
        server.add_insecure_port(f"unix:{socket_path}")
        server.start()
        ready.set()
        server.wait_for_termination()
        return

    async def predict_async(request: bytes, context) -> bytes:
        return predict(request, context)   # CPU-bound: runs in the loop thread, no hand-off

    async def main() -> None:
        handler = grpc.unary_unary_rpc_method_handler(predict_async)
        server = grpc.aio.server(maximum_concurrent_rpcs=256)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Work", {"Run": handler}),))
        server.add_insecure_port(f"unix:{socket_path}")
        await server.start()
        ready.set()
        await server.wait_for_termination()
    asyncio.run(main())


def drive(socket_path: str, callers: int, payloads: list[bytes], seconds: float, queue, avoid_cpu: int) -> None:
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)) - {avoid_cpu} or {avoid_cpu})
    import grpc

    async def run():
        sent, latencies = 0, []
        async with grpc.aio.insecure_channel(f"unix:{socket_path}") as channel:
            call = channel.unary_unary("/bench.Work/Run")
            await call(payloads[0], timeout=10)
            deadline = time.perf_counter() + seconds

            async def caller():
                nonlocal sent
                while time.perf_counter() < deadline:
                    index, begin = sent, time.perf_counter()
                    sent += 1
                    await call(payloads[index % len(payloads)], timeout=30)
                    latencies.append(time.perf_counter() - begin)
            await asyncio.gather(*(caller() for _ in range(callers)))
        return sent, sorted(latencies)
    queue.put(asyncio.run(run()))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--order", nargs="+", default=["threads", "aio", "threads", "aio"], choices=["threads", "aio"])
    parser.add_argument("--callers", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    from benchmarks.load.world import build_world, requests

    data_dir = tempfile.mkdtemp(prefix="hpd-kinds-")
    world = build_world(Path(data_dir), learner="ann")
    payloads = requests(world, 30000)
    context = multiprocessing.get_context("spawn")
    cpu = (os.cpu_count() or 1) - 1
    for kind in args.order:
        socket_path = os.path.join(tempfile.mkdtemp(prefix="hpd-kinds-sock-"), "s.sock")
        ready = context.Event()
        server = context.Process(target=serve, args=(kind, socket_path, data_dir, ready, args.workers, cpu),
                                 daemon=True)
        server.start()
        ready.wait(120)
        try:
            for callers in args.callers:
                queue = context.Queue()
                client = context.Process(target=drive, args=(socket_path, callers, payloads, args.seconds, queue, cpu))
                client.start()
                time.sleep(1.0)   # connected and warmed before the CPU clock starts
                before = cpu_seconds(server.pid)
                sent, latencies = queue.get(timeout=args.seconds + 120)
                used = cpu_seconds(server.pid) - before
                client.join()
                print(json.dumps({"server": kind, "callers": callers, "per_s": round(sent / args.seconds),
                                  "server_cpu_us_per_call": round(used / max(sent, 1) * 1e6),
                                  "p50_ms": round(latencies[len(latencies) // 2] * 1e3, 2),
                                  "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1e3, 2)}), flush=True)
        finally:
            server.terminate()
            server.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
