"""Replay real traces online with every walltime predictor; write results.json + results.md.

Usage: python benchmarks/walltime/run_traces.py [--risk 0.03] [--out benchmarks/walltime]
Traces: tests/data/traces/{KTH-SP2.swf, hpc2n-subset.swf, eagle-sample-1000.csv}.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

from hpcpredict.daemon.history.evaluate import evaluate_trace
from hpcpredict.daemon.history.traces import read_trace

ROOT = Path(__file__).resolve().parents[2]
TRACES = ("KTH-SP2.swf", "hpc2n-subset.swf", "eagle-sample-1000.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--risk", type=float, default=0.03)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "walltime")
    args = parser.parse_args()
    results = {"when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "machine": f"{platform.node()} {platform.processor() or platform.machine()}",
               "risk": args.risk, "traces": {}}
    for name in TRACES:
        jobs = read_trace(ROOT / "tests" / "data" / "traces" / name)
        started = time.perf_counter()
        scores = evaluate_trace(jobs, args.risk)
        seconds = time.perf_counter() - started
        results["traces"][name] = {"seconds": round(seconds, 2),
                                   "scores": {k: v.as_dict() for k, v in scores.items()}}
        print(f"{name}: {seconds:.1f} s")
        for key, s in scores.items():
            print(f"  {key:18s} acc {s.accuracy:.3f} under {s.under_rate:.3f} kill {s.kill_rate:.3f} "
                  f"median p/r {s.median_ratio:.2f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text(table(results))
    print(table(results))


def table(results: dict) -> str:
    lines = [f"Online replay, bound risk {results['risk']:g}; {results['when']}.", "",
             "| trace | predictor | n | accuracy | under | kill (within request) | median p/r | MAE (min) |",
             "|---|---|---|---|---|---|---|---|"]
    for trace, data in results["traces"].items():
        for key, s in data["scores"].items():
            lines.append(f"| {trace} | {key} | {s['n']} | {s['accuracy']:.3f} | {100 * s['under_rate']:.1f} % | "
                         f"{100 * s['kill_rate']:.1f} % | {s['median_ratio']:.2f} | {s['mae_s'] / 60:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
