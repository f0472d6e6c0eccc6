"""Time CommModelSet.predict (class B and class C) per request, model loaded once.

    .venv/bin/python benchmarks/comm/predict_speed.py MODEL_DIR TOPOLOGY.json
"""
import sys
import time
from pathlib import Path

import numpy as np

from hpcpredict.daemon.comm.service import CommModelSet, CommRequest
from hpcpredict.topology.placement import Placement

models = CommModelSet.load(Path(sys.argv[1]))
placement = Placement.load(sys.argv[2])
nodes = sorted(placement.paths, key=lambda n: int(n.rsplit("-", 1)[1]))
for pattern, ntasks, nnodes in (("halo3d", 256, 16), ("lulesh1", 216, 27), ("halo4d", 1024, 64)):
    req = CommRequest(pattern=pattern, message_bytes=65536, ntasks=ntasks, nodes=nnodes, ntasks_per_node=0)
    for label, kwargs in (("B", {}), ("C", {"node_list": nodes[:nnodes], "placement": placement})):
        times = []
        for _ in range(20):
            t = time.perf_counter()
            pred = models.predict(req, **kwargs)
            times.append(time.perf_counter() - t)
        print(f"{pattern:8} {ntasks:5d} ranks class {label}: median {1e3 * np.median(times):6.2f} ms "
              f"-> {pred.seconds * 1e6:9.1f} us")
