#!/usr/bin/env python3
"""Communication benchmark of seed 004 (Papadopoulou et al.), mpi4py.

Every point: Barrier; each rank posts Irecv from its PM random peers and Isend of PM messages
of l bytes to PM random peer ranks; Waitall. A rank's time per iteration is Barrier-exit to
Waitall-return; per rank the 3rd quartile over iterations; the point's time is the max over
ranks. Messages carry their sender's mark, and after the last iteration every receiver checks
that all bytes arrived from the right peer (``delivered``: a point that moved nothing is not a
measurement; ``bench-ingest`` rejects it). Peers come from ``hpcpredict.daemon.comm.patterns.benchmark_peers(ntasks, PM, seed)``
so the record's phase can be rebuilt exactly for feature extraction.

n and ppn are swept inside one allocation: for each point the ranks of ``n`` nodes (chosen at
random among the job's nodes: different allocations of the same shape) and the first ``ppn``
ranks on each of them form a sub-communicator, node-major (block mapping); the others wait.

Run under any launcher:
    srun -N 8 --ntasks-per-node 16 python commbench.py --out raw.jsonl
    mpirun -n 4 python commbench.py --nodes 1 --ppn 2,4 --sizes 16,65536 --peers 1,2 --out raw.jsonl
Rank 0 appends one JSON line per point; ``hpcpredict comm bench-ingest raw.jsonl --out data.csv``
turns them into records.
"""
import argparse
import json
import sys
import time

import numpy as np
from mpi4py import MPI

from hpcpredict.daemon.comm.patterns import benchmark_peers


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=_ints, default=None, help="node counts to sweep (default: powers of 2 up to the job's)")
    p.add_argument("--ppn", type=_ints, default=None, help="ranks per node to sweep (default: powers of 2 up to the job's)")
    p.add_argument("--sizes", type=_ints, default=[16, 256, 4096, 65536, 1 << 20, 16 << 20])
    p.add_argument("--peers", type=_ints, default=[1, 2, 3, 4])
    p.add_argument("--repeats", type=int, default=2, help="random node subsets per configuration")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def _powers(limit):
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def _mark(rank):
    """The byte a rank's messages carry, so a receiver can tell whose message arrived."""
    return rank % 251 + 1


def run_point(comm, peers, nbytes, iterations, warmup):
    """(3rd quartile of this rank's iteration times, whether every message it received in the
    last iteration held all ``nbytes`` of the sending peer's mark)."""
    rank = comm.Get_rank()
    dst = peers[:, rank]
    src = np.array([int(np.flatnonzero(row == rank)[0]) for row in peers])
    sendbuf = np.full(max(nbytes, 1), _mark(rank), dtype=np.uint8)
    recvbufs = [np.empty(max(nbytes, 1), dtype=np.uint8) for _ in range(len(dst))]
    times = []
    for it in range(warmup + iterations):
        comm.Barrier()
        start = MPI.Wtime()
        reqs = [comm.Irecv([recvbufs[k], nbytes, MPI.BYTE], source=int(src[k]), tag=k) for k in range(len(src))]
        reqs += [comm.Isend([sendbuf, nbytes, MPI.BYTE], dest=int(dst[k]), tag=k) for k in range(len(dst))]
        MPI.Request.Waitall(reqs)
        if it >= warmup:
            times.append(MPI.Wtime() - start)
        if it < warmup + iterations - 1:
            for buf in recvbufs:
                buf.fill(0)
    delivered = all(bool(np.all(buf[:nbytes] == _mark(int(src[k])))) for k, buf in enumerate(recvbufs))
    return float(np.percentile(times, 75)), delivered


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    hosts = world.allgather(MPI.Get_processor_name())
    node_names = list(dict.fromkeys(hosts))                  # order of first appearance
    ranks_on = {name: [r for r, h in enumerate(hosts) if h == name] for name in node_names}
    max_ppn = min(len(v) for v in ranks_on.values())
    node_counts = args.nodes or _powers(len(node_names))
    ppns = args.ppn or _powers(max_ppn)
    rng = np.random.default_rng(args.seed)                   # same stream on every rank
    out = open(args.out, "a", encoding="utf-8") if rank == 0 else None
    started = time.time()
    for n in node_counts:
        for ppn in ppns:
            if n > len(node_names) or ppn > max_ppn or n * ppn < 2:
                continue
            for _ in range(args.repeats):
                chosen = sorted(rng.choice(len(node_names), size=n, replace=False))
                members = [r for i in chosen for r in ranks_on[node_names[i]][:ppn]]
                for pm in args.peers:
                    for nbytes in args.sizes:
                        seed = int(rng.integers(1 << 31))
                        inside = rank in members
                        sub = world.Split(0 if inside else MPI.UNDEFINED, members.index(rank) if inside else 0)
                        q3, delivered = 0.0, True
                        if inside:
                            peers = benchmark_peers(len(members), pm, seed)
                            q3, delivered = run_point(sub, peers, nbytes, args.iterations, args.warmup)
                            sub.Free()
                        slowest = world.reduce(q3, op=MPI.MAX, root=0)
                        delivered = world.reduce(delivered, op=MPI.LAND, root=0)
                        if rank == 0:
                            out.write(json.dumps({
                                "pattern": "benchmark", "ntasks": len(members), "message_bytes": nbytes,
                                "peers": pm, "seed": seed, "iterations": args.iterations,
                                "nodes": [node_names[i] for i in chosen],
                                "rank_nodes": [chosen.index(node_names.index(hosts[r])) for r in members],
                                "time_s": slowest, "delivered": bool(delivered), "launcher": "mpi"}) + "\n")
                            out.flush()
    if rank == 0:
        out.close()
        print(f"commbench: done in {time.time() - started:.1f} s, wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
