"""Markdown tables of benchmarks/runtime/results.json (pasted into benchmarks/README.md).

    python benchmarks/runtime/tables.py benchmarks/runtime/results.json
"""
from __future__ import annotations

import json
import sys


def pct(value) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def main(path: str) -> None:
    results = json.load(open(path))
    print("| dataset | learner | train | MAPE % | rank acc. % | cov. 80 % | cov. 95 % | width 80 |")
    print("|---|---|---|---|---|---|---|---|")
    for row in results.get("accuracy", []):
        print(f"| {row['dataset']} | {row['learner']} | {row['train_fraction']:.0%} ({row['n_train']} runs) | "
              f"{pct(row['mape'])} | {pct(row['rank_accuracy'])} | {pct(row['coverage80'])} | "
              f"{pct(row['coverage95'])} | {row['interval_width80']:.2f} |")
    print("\n| learner (LAMMPS, 50 % training, 10 splits) | cov. 80 % (sd) | cov. 95 % (sd) | width 80 | MAPE % |")
    print("|---|---|---|---|---|")
    for row in results.get("coverage", []):
        print(f"| {row['learner']} | {pct(row['coverage80'])} ({pct(row['coverage80_std'])}) | "
              f"{pct(row['coverage95'])} ({pct(row['coverage95_std'])}) | {row['interval_width80']:.2f} | "
              f"{pct(row['mape'])} |")
    print("\n| time share | learner | MAPE % | rank acc. % | runtime features kept | dropped |")
    print("|---|---|---|---|---|---|")
    for row in results.get("runtime_features", []):
        share = "none (submit time)" if row["time_share"] is None else f"{row['time_share']:.0%}"
        print(f"| {share} | {row['learner']} | {pct(row['mape'])} | {pct(row['rank_accuracy'])} | "
              f"{', '.join(row['runtime_features_kept']) or '—'} | {', '.join(row['runtime_features_dropped'])} |")
    print("\n| transfer | target runs | model | MAPE % |")
    print("|---|---|---|---|")
    for row in results.get("transfer", []):
        print(f"| {row['dataset']} | {row['target_share']:.0%} ({row['n_target_runs']}) | {row['model']} | "
              f"{pct(row['mape'])} |")
    for key in ("active_learning", "active_learning_synthetic"):
        result = results.get(key)
        if not result:
            continue
        print(f"\n{key}: runs {result['runs']}")
        for label, curve in result["mape"].items():
            print(f"- {label}: " + ", ".join(pct(v) for v in curve))
        print(f"- random final MAPE {pct(result['random_final_mape'])} %; active reaches it at "
              f"{result['active_runs_to_reach']} runs (saving {pct(result['saving'])} %)")
    if results.get("served"):
        print("\n| served (CV-chosen, loaded artifact, `estimate`) | train | learners chosen | MAPE % | rank acc. % | "
              "cov. 80 % | cov. 95 % | width 80 |")
        print("|---|---|---|---|---|---|---|---|")
        for row in results["served"]:
            chosen = ", ".join(f"{k} ×{v}" for k, v in row["learners_chosen"].items())
            print(f"| {row['dataset']} | {row['train_fraction']:.0%} ({row['n_train']} runs) | {chosen} | "
                  f"{pct(row['mape'])} | {pct(row['rank_accuracy'])} | {pct(row['coverage80'])} | "
                  f"{pct(row['coverage95'])} | {row['interval_width80']:.2f} |")
    if "latency" in results:
        print("\nlatency:", json.dumps(results["latency"]))


if __name__ == "__main__":
    main(sys.argv[1])
