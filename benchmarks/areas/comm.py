"""Communication time: class A/B/C models vs baselines on SimGrid-simulated fat tree and dragonfly.

    python -m benchmarks run comm                    # fit + evaluate on the recorded simulated data
    python -m benchmarks run comm --plots DIR        # also predicted-vs-measured scatter plots
    python -m benchmarks run comm --full             # re-simulate the data with SimGrid first (~15 min)

Every number is SIMULATED (SimGrid flow model, our link parameters, not a calibrated machine).
The models are trained on the recorded benchmark sweep (benchmarks/comm/data/FABRIC-train.csv,
4,000 points) and scored on five application patterns on fresh allocations (FABRIC-test.csv,
600 points): MMRE, Pred25 (share within 25 %) and RCC (rank correlation). Goal for class C on
all patterns: MMRE <= 15 %, Pred25 >= 80 %, RCC >= 0.95, better than class A and every baseline.
Feature extraction (65,536 ranks) and per-request predict() times move with the machine's load.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.comm.feature_speed import feature_speed
from benchmarks.comm.predict_speed import predict_speed
from benchmarks.comm.sweep import DATA, FABRICS, fit_and_evaluate, simulate_data

DESCRIPTION = "communication-time models on simulated fabrics: MMRE / Pred25 / RCC per class; feature speed"


def _cell(score: dict) -> dict:
    return {"mmre": round(score["mmre"], 3), "pred25": round(score["pred25"], 3), "rcc": round(score["rcc"], 3)}


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run comm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fabric", choices=sorted(FABRICS), nargs="+", default=sorted(FABRICS))
    parser.add_argument("--tune-iter", type=int, default=3, help="random-search candidates per class (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plots", type=Path, help="write scatter-FABRIC-MODEL.png here")
    parser.add_argument("--full", action="store_true",
                        help="re-simulate the training and test data first (overwrites benchmarks/comm/data)")
    parser.add_argument("--no-speed", action="store_true", help="skip the feature and predict() timings")
    options = parser.parse_args(args)
    result: dict = {"data": str(DATA.relative_to(DATA.parents[2])), "simulated": True,
                    "resimulated": options.full, "tune_iter": options.tune_iter, "fabrics": {}}
    headline: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for fabric in options.fabric:
            if options.full:
                simulate_data(fabric)
            model_dir = Path(tmp) / fabric
            fitted = fit_and_evaluate(fabric, options.tune_iter, options.seed, plots=options.plots,
                                      keep_model=model_dir)
            if not options.no_speed:
                fitted["predict_speed"] = predict_speed(model_dir, DATA / f"{fabric}-topology.json")
            result["fabrics"][fabric] = fitted
            scores = fitted["scores"]
            baselines = {name: per["all"] for name, per in scores.items() if name != "classC" and "all" in per}
            headline[fabric] = {"classC": _cell(scores["classC"]["all"]),
                                "best_other_mmre": min((round(s["mmre"], 3), name) for name, s in baselines.items())[::-1]}
    if not options.no_speed:
        result["feature_speed"] = feature_speed()
        headline["features_65536_ranks_ms"] = {k: result["feature_speed"][k]["median_ms"]
                                               for k in ("total A+B+C, IB", "total A+B+C, dragonfly")}
    result["headline"] = headline
    return result
