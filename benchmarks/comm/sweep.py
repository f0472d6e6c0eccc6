"""The SimGrid sweep and the model fit behind ``python -m benchmarks run comm`` (SIMULATED data).

Fabrics: fat tree ``3;8,4,4;1,2,2;1,2,2`` (128 nodes, 2:1 oversubscribed per level) and
dragonfly ``4,2;4,1;4,1;4`` (256 nodes), bursty background traffic from other jobs (6 / 8
streams). Training = the paper's random-peer benchmark (4,000 points, seed 1); test = Halo-3D,
Halo-4D, LULESH-1/2/3, 120 points each on fresh allocations (seeds 101-105). The recorded data
are in ``data/FABRIC-{train,test}.csv`` and ``data/FABRIC-topology.json``; :func:`simulate_data`
regenerates them (about 15 minutes of simulation).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from hpcpredict.daemon.comm.records import read_records, write_records
from hpcpredict.daemon.comm.served import CommModelSet
from hpcpredict.daemon.lab.comm.evaluation import evaluate, predict_all, scatter_plots
from hpcpredict.daemon.lab.comm import fabric_placement, plan_points, simulate
from hpcpredict.daemon.lab.comm.training import train_model_set
from hpcpredict.topology.placement import Placement

DATA = Path(__file__).resolve().parent / "data"
FABRICS = {"fattree": ("3;8,4,4;1,2,2;1,2,2", 6), "dragonfly": ("4,2;4,1;4,1;4", 8)}   # shape, background streams
TEST_PATTERNS = ("halo3d", "halo4d", "lulesh1", "lulesh2", "lulesh3")


def simulate_data(fabric: str, train_points: int = 4000, test_points: int = 120, data: Path = DATA) -> None:
    """Simulate the training sweep and the test patterns of one fabric into ``data``."""
    shape, background = FABRICS[fabric]
    data.mkdir(parents=True, exist_ok=True)
    points = plan_points(fabric, shape, "benchmark", train_points, 1)
    write_records(data / f"{fabric}-train.csv", simulate(fabric, shape, points, background=background, seed=1))
    fabric_placement(fabric, shape).save(data / f"{fabric}-topology.json")
    test = []
    for seed, pattern in enumerate(TEST_PATTERNS, start=101):   # other seeds: fresh allocations
        points = plan_points(fabric, shape, pattern, test_points, seed)
        test += simulate(fabric, shape, points, background=background, seed=seed)
    write_records(data / f"{fabric}-test.csv", test)


def fit_and_evaluate(fabric: str, tune_iter: int = 3, seed: int = 0, data: Path = DATA,
                     plots: Path | None = None, keep_model: Path | None = None) -> dict:
    """Train classes A/B/C and the baselines on ``FABRIC-train.csv``; scores on ``FABRIC-test.csv``.

    Returns {"trained": manifest summary, "scores": {model: {pattern: {n, mmre, pred25, rcc}}}}."""
    placement = Placement.load(str(data / f"{fabric}-topology.json"))
    train, test = read_records(data / f"{fabric}-train.csv"), read_records(data / f"{fabric}-test.csv")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = keep_model or Path(tmp) / fabric
        manifest = train_model_set(train, placement, model_dir, tune_iter=tune_iter, seed=seed)
        model_set = CommModelSet.load(model_dir)
        scores = evaluate(model_set, test, placement)
        if plots:
            plots.mkdir(parents=True, exist_ok=True)
            predictions, measured, patterns = predict_all(model_set, test, placement)
            scatter_plots(predictions, measured, patterns, str(plots / f"scatter-{fabric}"),
                          f"SIMULATED {fabric} {FABRICS[fabric][0]} (SimGrid)")
    trained = {name: {"features": len(spec["features"])} for name, spec in manifest["classes"].items()}
    return {"train_records": len(train), "test_records": len(test), "classes": trained,
            "baselines": list(manifest["baselines"]), "scores": scores}
