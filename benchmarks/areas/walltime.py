"""Walltime from job history: online replay of three real traces, hindsight ceilings, training cost.

    python -m benchmarks run walltime            # replay + headroom + training on 2*10^5 jobs
    python -m benchmarks run walltime --full     # training on 10^6 jobs (the issue's scale)

Online replay in submission order: a job is predicted knowing only the jobs that ended before
it was submitted. Accuracy = mean min(p, r)/max(p, r); kill = share of the jobs that ended
within their request but outlived the prediction; every predictor is capped at the request.
The bound is hpcpredict's limit at the configured risk (3 %). Headroom: what a per-user choice
among our experts could reach *in hindsight* (a ceiling, not an online method). Accuracy
numbers do not depend on the machine's load; training and predict() times do.
"""
from __future__ import annotations

import argparse

from benchmarks.walltime.headroom import headroom
from benchmarks.walltime.run_traces import replay_traces, table
from benchmarks.walltime.training import train_and_time

DESCRIPTION = "walltime point accuracy and 3 % bound kills on KTH-SP2 / HPC2N / Eagle; training and predict() cost"
OURS, BOUND = "hpcpredict", "hpcpredict-bound"


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run walltime", description=__doc__.split("\n\n")[0])
    parser.add_argument("--risk", type=float, default=0.03, help="the bound's kill risk (default 0.03)")
    parser.add_argument("--jobs", type=int, default=200_000, help="resampled jobs to train on (default 2*10^5)")
    parser.add_argument("--full", action="store_true", help="train on 10^6 jobs")
    parser.add_argument("--no-training", action="store_true", help="accuracy only: skip the training/latency part")
    options = parser.parse_args(args)
    traces = replay_traces(options.risk)
    ceilings = headroom(options.risk)
    headline = {}
    for name, data in traces.items():
        scores = data["scores"]
        others = {k: v["accuracy"] for k, v in scores.items() if k not in (OURS, BOUND)}
        best_other = max(others, key=others.get)
        headline[name] = {
            "jobs": scores[OURS]["n"],
            "accuracy": round(scores[OURS]["accuracy"], 3),
            "best_other": {best_other: round(others[best_other], 3)},
            "bound_kill_rate": round(scores[BOUND]["kill_rate"], 4),
            "bound_accuracy": round(scores[BOUND]["accuracy"], 3),
            "bound_median_over_runtime": round(scores[BOUND]["median_ratio"], 2),
            "hindsight_per_user_best_expert": ceilings[name]["point"]["per_user_best_fixed_expert"],
        }
    result = {"headline": headline, "risk": options.risk, "traces": traces, "headroom": ceilings,
              "table": table(traces, options.risk)}
    if not options.no_training:
        training = train_and_time(1_000_000 if options.full else options.jobs)
        result["training"] = training
        headline["training"] = {k: training[k] for k in ("jobs", "train_s", "train_cpu_s", "artifact_mb", "predict_cpu_us_median",
                                                         "predict_cpu_us_p99", "predict_us_p99")}
    return result
