"""Issue 7's targets from a synthetic_protocol.py results file (optionally next to an earlier one).

Accuracy cells: (m, noise, bucket) where a modeler's share is >= Extra-P 4.2.5's (median).
Extrapolation cells: (m, noise >= 50 %, P1+..P4+) where its median error is <= 0.8x Extra-P's.
Also the error ratios to Extra-P at >= 50 % noise (min-max per m). ``--reference
extrap-4.2.5-mean`` compares with Extra-P fed the means of the repetitions instead (its own
default; since round 6 the adaptive modeler fits means of noisy symmetric data).

    .venv/bin/python benchmarks/scaling/targets.py benchmarks/scaling/synthetic_results.json \
        --before benchmarks/scaling/synthetic_results_round3.json
"""
from __future__ import annotations

import argparse
import json
import sys

REFERENCE = "extrap-4.2.5"


def _index(path: str) -> dict:
    rows = json.load(open(path))["rows"]
    return {(r["modeler"], r["m"], r["noise"]): r for r in rows}


def summary(rows: dict, modeler: str, reference: str = REFERENCE) -> dict:
    out = {}
    for m in sorted({k[1] for k in rows}):
        noises = sorted({k[2] for k in rows if k[1] == m})
        acc_short, acc_total, ext_met, ext_total, ratios, misses = [], 0, 0, 0, [], []
        for noise in noises:
            mine, ref = rows[(modeler, m, noise)], rows[(reference, m, noise)]
            for key in (k for k in mine if k.startswith("acc")):
                acc_total += 1
                if mine[key] < ref[key] - 1e-9:
                    acc_short.append(f"{noise:.0%} {key[4:]} {mine[key]:.1f} vs {ref[key]:.1f}")
            if noise >= 0.5:
                for k in range(1, 5):
                    ratio = mine[f"P{k}+"] / max(ref[f"P{k}+"], 1e-12)
                    ratios.append(ratio)
                    ext_total += 1
                    ext_met += ratio <= 0.8
                    if ratio > 0.8:
                        misses.append(f"{noise:.0%} P{k}+ {ratio:.2f}")
        out[m] = {"accuracy": (acc_total - len(acc_short), acc_total), "accuracy_short": acc_short,
                  "extrapolation": (ext_met, ext_total), "ratios": (min(ratios), max(ratios)),
                  "mean_ratio": sum(ratios) / len(ratios), "misses": misses}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results")
    parser.add_argument("--before", default=None)
    parser.add_argument("--reference", default=REFERENCE, help="Extra-P row to compare with")
    args = parser.parse_args(argv)
    files = [("before", args.before), ("now", args.results)] if args.before else [("now", args.results)]
    for modeler in ("adaptive", "regression"):
        for label, path in files:
            s = summary(_index(path), modeler, args.reference)
            acc = sum(v["accuracy"][0] for v in s.values()), sum(v["accuracy"][1] for v in s.values())
            ext = sum(v["extrapolation"][0] for v in s.values()), sum(v["extrapolation"][1] for v in s.values())
            print(f"{modeler:<10} {label:<6} accuracy cells >= {args.reference} {acc[0]}/{acc[1]}, "
                  f"error <= 0.8x at >= 50 % {ext[0]}/{ext[1]}")
            for m, v in s.items():
                print(f"    m={m}: accuracy {v['accuracy'][0]}/{v['accuracy'][1]}"
                      f"{' (short: ' + '; '.join(v['accuracy_short']) + ')' if v['accuracy_short'] else ''}; "
                      f"error <= 0.8x {v['extrapolation'][0]}/{v['extrapolation'][1]}, ratios "
                      f"{v['ratios'][0]:.2f}-{v['ratios'][1]:.2f} (mean {v['mean_ratio']:.2f})"
                      f"{'; misses: ' + ', '.join(v['misses']) if v['misses'] and modeler == 'adaptive' else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
