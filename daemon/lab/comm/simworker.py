"""SimGrid process that times communication phases (run as ``python -m``, one engine per process).

SimGrid allows one engine per process, so :mod:`hpcpredict.daemon.lab.comm.simulate` starts this
module as a child: ``python -m hpcpredict.daemon.lab.comm.simworker SPEC.json OUT.jsonl``. SPEC
holds the platform XML path and the points; for every point this writes one JSON line
``{"index": i, "time_s": t}`` as soon as it is simulated.

The benchmark is the s4u "driver" form (SIMGRID.md: same times as one actor per rank, 2-4x
faster): one actor starts every message of the phase as a host-to-host ``Comm.sendto_async``
at the same simulated instant (the Barrier), waits for all, and reads each ``finish_time``. A
rank's time is the latest completion among messages it sends or receives (its Waitall);
per rank the 3rd quartile over iterations, the phase time is the max over ranks.

Background traffic (``background`` = K streams): in every iteration each stream is busy with
probability 0.6 and then sends one message of a log-uniform random size (64 KiB - 32 MiB)
between two random nodes *outside* the allocation (other jobs), starting with the phase;
whatever is left when the phase ends is cancelled. Busy/idle and sizes vary per iteration,
so iterations differ and the 3rd quartile matters, as on a shared machine.
"""
from __future__ import annotations

import json
import sys

import numpy as np

from ...comm.patterns import build_pattern

BACKGROUND_BUSY = 0.6
BACKGROUND_BYTES = (1 << 16, 1 << 25)


def _phase_times(sg, hosts, point, rng, background: int, iterations: int) -> float:
    msgs = build_pattern(point["pattern"], point["ntasks"], point["message_bytes"],
                         grid=tuple(point.get("grid", ())), peers=point.get("peers", 0),
                         seed=point["seed"])
    alloc = np.asarray(point["hosts"], dtype=np.int64)
    rank_host = alloc[np.asarray(point["rank_node"], dtype=np.int64)]
    src_hosts = [hosts[h] for h in rank_host[msgs.src]]
    dst_hosts = [hosts[h] for h in rank_host[msgs.dst]]
    sizes = msgs.nbytes.tolist()
    others = np.setdiff1d(np.arange(len(hosts)), alloc)
    per_rank = np.zeros((iterations, msgs.ntasks))
    for it in range(iterations):
        noise = []
        if background and others.size >= 2:
            for _ in range(background):
                if rng.random() < BACKGROUND_BUSY:
                    a, b = rng.choice(others, size=2, replace=False)
                    size = int(np.exp(rng.uniform(*np.log(BACKGROUND_BYTES))))
                    noise.append(sg.Comm.sendto_async(hosts[a], hosts[b], size))
        start = sg.Engine.clock
        comms = [sg.Comm.sendto_async(s, d, n) for s, d, n in zip(src_hosts, dst_hosts, sizes)]
        sg.Comm.wait_all(comms)
        done = np.array([c.finish_time for c in comms]) - start
        for comm in noise:
            if comm.remaining > 0:
                comm.cancel()
        rank_time = np.zeros(msgs.ntasks)
        np.maximum.at(rank_time, msgs.src, done)
        np.maximum.at(rank_time, msgs.dst, done)
        per_rank[it] = rank_time
        sg.this_actor.sleep_for(1e-3)   # idle gap between iterations (lets cancelled flows go)
    return float(np.percentile(per_rank, 75, axis=0).max())


def main(argv: list[str]) -> int:
    import simgrid as sg

    spec_path, out_path = argv
    with open(spec_path, encoding="utf-8") as stream:
        spec = json.load(stream)
    engine = sg.Engine(["simworker", "--cfg=network/model:SMPI", "--cfg=network/optim:Full",
                        "--cfg=network/crosstraffic:0", "--log=root.thres:critical"])
    engine.load_platform(spec["platform"])
    hosts = sorted(engine.all_hosts, key=lambda h: int(h.name.rsplit("-", 1)[1]))
    rng = np.random.default_rng(spec["seed"])
    out = open(out_path, "a", encoding="utf-8")

    def driver():
        for index, point in enumerate(spec["points"]):
            if index < spec.get("skip", 0):
                continue
            t = _phase_times(sg, hosts, point, rng, spec["background"], spec["iterations"])
            out.write(json.dumps({"index": index, "time_s": t}) + "\n")
            out.flush()

    sg.Actor.create("driver", hosts[0], driver)
    engine.run()
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
