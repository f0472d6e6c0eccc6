"""How much does the simulated background traffic change phase times? (SIMULATED)

Re-simulates the fat-tree halo3d test points (same allocations) with K bursty background
streams, twice with different background draws, and without background.
    .venv/bin/python benchmarks/comm/background_effect.py [K ...]   (a check of the simulation, not part of the area)
"""
import sys

import numpy as np

from hpcpredict.daemon.lab.comm import plan_points, scores, simulate

SHAPE = "3;8,4,4;1,2,2;1,2,2"
points = plan_points("fattree", SHAPE, "halo3d", 60, seed=101)     # the test set's seed
quiet = np.array([r.time_s for r in simulate("fattree", SHAPE, points, background=0)])
for k in [int(a) for a in sys.argv[1:]] or [6, 24, 64]:
    a = np.array([r.time_s for r in simulate("fattree", SHAPE, points, background=k, seed=1)])
    b = np.array([r.time_s for r in simulate("fattree", SHAPE, points, background=k, seed=2)])
    ratio = a / quiet
    print(f"K={k:3d}: slowdown vs no background median {np.median(ratio):.3f} p90 {np.quantile(ratio, .9):.3f} "
          f"max {ratio.max():.2f}; two background draws differ by MMRE {100 * scores(a, b)['mmre']:.2f} %")
