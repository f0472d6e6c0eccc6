"""Why a Predict costs ~2x more CPU inside the server than in a loop: other threads waking.

    .venv/bin/python -m benchmarks.load.wakeups --calls 3000

In one process pinned to one CPU (as the daemon is), the real servicer answers the load
benchmark's requests (:func:`benchmarks.load.world.build_world`) three times: alone; while
another thread wakes every 200 µs and does nothing (a sleep loop: the pattern of gRPC's poller
and I/O threads); and while another thread touches 16 MB every 200 µs. Prints the servicer
thread's own CPU time per call (``time.thread_time``) and the wall time per call.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.load.world import build_world, requests


class _Context:
    def abort(self, code, message):
        raise RuntimeError(f"{code}: {message}")

    def peer(self):
        return ""


def _ticker(stop: threading.Event, interval_s: float) -> None:
    while not stop.wait(interval_s):
        pass


def _toucher(stop: threading.Event, interval_s: float) -> None:
    import numpy as np

    block = np.zeros(2_000_000)
    while not stop.wait(interval_s):
        block += 1.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1)
    parser.add_argument("--interval-us", type=float, default=200.0)
    args = parser.parse_args(argv)
    os.sched_setaffinity(0, {args.cpu})

    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.server import create_daemon
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    data_dir = Path(tempfile.mkdtemp(prefix="hpd-wakeups-"))
    try:
        world = build_world(data_dir, learner="ann")
        config = load_config(None, environ={"HPCPREDICT_DATA_DIR": str(data_dir), "HPCPREDICT_DAEMON_HOOK_SOCKET": ""})
        daemon = create_daemon(config)
        daemon.engine.start()
        messages = [pb.JobRequest.FromString(b) for b in requests(world, 300 + 3 * args.calls)]
        servicer, context = daemon.servicer, _Context()
        for message in messages[:300]:
            servicer.Predict(message, context)
        print(f"{'beside the servicer thread':<44} {'CPU µs/call':>12} {'wall µs/call':>13}")
        for number, (name, target) in enumerate((("nothing", None), ("a thread waking every interval", _ticker),
                                                 ("a thread touching 16 MB every interval", _toucher))):
            batch = messages[300 + number * args.calls:300 + (number + 1) * args.calls]
            stop = threading.Event()
            other = threading.Thread(target=target, args=(stop, args.interval_us * 1e-6)) if target else None
            if other is not None:
                other.start()
            cpu, wall = time.thread_time(), time.perf_counter()
            for message in batch:
                servicer.Predict(message, context)
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            stop.set()
            if other is not None:
                other.join()
            print(f"{name:<44} {cpu / len(batch) * 1e6:12.0f} {wall / len(batch) * 1e6:13.0f}")
        daemon.store.close()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
