"""Replay real traces online with every walltime predictor (``python -m benchmarks run walltime``).

Traces: tests/data/traces/{KTH-SP2.swf, hpc2n-subset.swf, eagle-sample-1000.csv}.
"""
from __future__ import annotations

import time
from pathlib import Path

from hpcpredict.daemon.lab.history import evaluate_trace, read_trace

ROOT = Path(__file__).resolve().parents[2]
TRACES = ("KTH-SP2.swf", "hpc2n-subset.swf", "eagle-sample-1000.csv")


def replay_traces(risk: float = 0.03) -> dict:
    """Every predictor's scores on every trace, and how long each replay took."""
    out = {}
    for name in TRACES:
        jobs = read_trace(ROOT / "tests" / "data" / "traces" / name)
        started = time.perf_counter()
        scores = evaluate_trace(jobs, risk)
        out[name] = {"seconds": round(time.perf_counter() - started, 2),
                     "scores": {k: v.as_dict() for k, v in scores.items()}}
    return out


def table(traces: dict, risk: float) -> str:
    """The full per-predictor table as markdown."""
    lines = [f"Online replay, bound risk {risk:g}.", "",
             "| trace | predictor | n | accuracy | under | kill (within request) | median p/r | MAE (min) |",
             "|---|---|---|---|---|---|---|---|"]
    for trace, data in traces.items():
        for key, s in data["scores"].items():
            lines.append(f"| {trace} | {key} | {s['n']} | {s['accuracy']:.3f} | {100 * s['under_rate']:.1f} % | "
                         f"{100 * s['kill_rate']:.1f} % | {s['median_ratio']:.2f} | {s['mae_s'] / 60:.0f} |")
    return "\n".join(lines) + "\n"

