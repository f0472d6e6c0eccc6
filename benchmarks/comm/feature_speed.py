"""Time class A/B/C feature extraction for 65,536 ranks x 26 messages (LULESH-1 interior).

Part of ``python -m benchmarks run comm``. Goal: <= 100 ms per phase; median and best of 7 runs.
"""
import time

import numpy as np

from hpcpredict.daemon.comm.features import NodeTraffic, class_a, class_b, class_c, feature_vector
from hpcpredict.daemon.comm.patterns import build_pattern
from hpcpredict.topology.mapping import map_ranks

NTASKS, PPN = 65536, 32


def timed_ms(fn, repeat=7):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def feature_speed(repeat: int = 7) -> dict:
    """{part: {"median_ms", "best_ms"}} for one LULESH-1 phase of 65,536 ranks on 2,048 nodes."""
    msgs = build_pattern("lulesh1", NTASKS, 100_000, grid=(64, 32, 32))
    rank_node = map_ranks(NTASKS // PPN, NTASKS, "block").astype(np.int64)
    nodes = NTASKS // PPN
    ib = np.stack([np.arange(nodes) // 18, np.arange(nodes) // 216], axis=1)          # 18 nodes/switch
    df = np.stack([np.arange(nodes) // 4, np.arange(nodes) // 64, np.arange(nodes) // 384], axis=1)
    traffic = NodeTraffic.of(msgs, rank_node)
    parts = {
        "class A": lambda: class_a(msgs, rank_node),
        "node-pair aggregation": lambda: NodeTraffic.of(msgs, rank_node),
        "class B (given pairs)": lambda: class_b(msgs, rank_node, traffic),
        "class C IB (given pairs)": lambda: class_c(msgs, rank_node, ib, "infiniband", ("switch", "rack"), traffic),
        "class C dragonfly (given pairs)": lambda: class_c(msgs, rank_node, df, "dragonfly",
                                                          ("aries", "chassis", "group"), traffic),
        "total A+B+C, IB": lambda: feature_vector(msgs, rank_node, "C", ib, "infiniband", ("switch", "rack")),
        "total A+B+C, dragonfly": lambda: feature_vector(msgs, rank_node, "C", df, "dragonfly",
                                                         ("aries", "chassis", "group")),
    }
    out = {"ranks": NTASKS, "messages": len(msgs), "nodes": nodes}
    for name, fn in parts.items():
        median, best = timed_ms(fn, repeat)
        out[name] = {"median_ms": round(median, 1), "best_ms": round(best, 1)}
    return out
