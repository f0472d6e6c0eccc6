"""Markdown tables for benchmarks/README.md from the results JSON files.

    .venv/bin/python benchmarks/scaling/tables.py benchmarks/scaling/synthetic_results.json \
        benchmarks/scaling/mpi_results.json
"""
import json
import sys


def synthetic(path: str) -> None:
    data = json.load(open(path))
    rows = data["rows"]
    print(f"{data['tasks']} tasks, seed {data['seed']}, adaptation {data['adapt_samples']} samples/class; "
          f"wall s: " + ", ".join(f"{k} {v:.0f}" for k, v in data["wall_seconds"].items()))
    print()
    print("| m | noise | modeler | d≤1/4 | d≤1/3 | d≤1/2 | P1+ | P2+ | P3+ | P4+ |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in sorted({r["m"] for r in rows}):
        for noise in sorted({r["noise"] for r in rows}):
            for r in rows:
                if r["m"] == m and r["noise"] == noise:
                    accs = [v for k, v in r.items() if k.startswith("acc")]
                    print(f"| {m} | {noise:.0%} | {r['modeler']} | " + " | ".join(f"{a:.0f}" for a in accs)
                          + " | " + " | ".join(f"{r[f'P{k}+']:.1f}" for k in range(1, 5)) + " |")


def mpi(path: str) -> None:
    data = json.load(open(path))
    for app, item in data["apps"].items():
        print(f"{app}: median runtime (s) by processes: "
              + ", ".join(f"{p}: {t:.2f}" for p, t in item["median_wall_s"].items()))
    print()
    print("| application | modeler | trained on | policy | recommended | best measured | node-h ratio "
          "| runtime / fastest |")
    print("|---|---|---|---|---|---|---|---|")
    hits = total = 0
    for app, item in data["apps"].items():
        for r in item["advice"]:
            policy = r["policy"] + (f" (deadline {r['requested_time_s']:.2f} s)" if r["requested_time_s"] else "")
            reps = f", reps < {r['train_reps']}" if r.get("train_reps") else ""
            trained = f"p = {r['train_counts'][0]}..{r['train_counts'][-1]} ({len(r['train_counts'])} counts{reps})"
            over = f"{r['runtime_over_fastest']:.2f}" if "runtime_over_fastest" in r else "—"
            print(f"| {app} | {r['modeler']} | {trained} | {policy} | {r['recommended']} | {r['best_measured']} | "
                  f"{r['node_hours_ratio']:.2f} | {over} |")
            total += 1
            hits += abs(r["node_hours_ratio"] - 1) <= 0.10
    print()
    print(f"node-hours within 10 % of the best measured choice: {hits} of {total}")


if __name__ == "__main__":
    synthetic(sys.argv[1])
    print()
    mpi(sys.argv[2])
