"""The scaling targets from the synthetic protocol's summary rows (synthetic_protocol.py).

Accuracy cells: (m, noise, bucket) where a modeler's share is >= Extra-P 4.2.5's (median).
Extrapolation cells: (m, noise >= 50 %, P1+..P4+) where its median error is <= 0.8x Extra-P's.
Also the error ratios to Extra-P at >= 50 % noise (min-max per m). ``reference=
"extrap-4.2.5-mean"`` compares with Extra-P fed the means of the repetitions instead (its own
default; the adaptive modeler fits means of noisy symmetric data).
"""
from __future__ import annotations


REFERENCE = "extrap-4.2.5"


def index_rows(rows: list[dict]) -> dict:
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


def totals(rows: list[dict], modeler: str, reference: str = REFERENCE) -> dict:
    """Cells met over all m: {"accuracy": [met, of], "extrapolation": [met, of], "per_m": ...}."""
    per_m = summary(index_rows(rows), modeler, reference)
    return {"accuracy": [sum(v["accuracy"][0] for v in per_m.values()), sum(v["accuracy"][1] for v in per_m.values())],
            "extrapolation": [sum(v["extrapolation"][0] for v in per_m.values()),
                              sum(v["extrapolation"][1] for v in per_m.values())],
            "per_m": {str(m): {"accuracy": list(v["accuracy"]), "accuracy_short": v["accuracy_short"],
                               "extrapolation": list(v["extrapolation"]),
                               "ratio_range": [round(x, 2) for x in v["ratios"]],
                               "mean_ratio": round(v["mean_ratio"], 2), "misses": v["misses"]}
                      for m, v in per_m.items()}}
