"""Score a model set on measured/simulated records: per model, per pattern and overall.

Models: ``classA``, ``classB``, ``classC`` (GBRT), ``alpha-beta``, ``alpha-beta-gamma``,
``single-variable``; the last three of these need the placement, as does class C.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .accuracy import scores
from .baselines import load_baselines
from .dataset import feature_table
from ...comm.records import CommRecord
from ...comm.served import CommModelSet
from ....topology.placement import Placement

MODEL_ORDER = ("classA", "classB", "classC", "alpha-beta", "alpha-beta-gamma", "single-variable")


def predict_all(model_set: CommModelSet, records: Sequence[CommRecord], placement: Placement | None
                ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(model name -> predicted seconds, measured seconds, pattern per record)."""
    X, names, y = feature_table(records, placement)
    predictions: dict[str, np.ndarray] = {}
    for cls, model in model_set.models.items():
        if cls == "C" and placement is None:
            continue
        predictions[f"class{cls}"] = model.predict(X, names)
    for name, baseline in load_baselines(model_set.manifest).items():
        if name != "alpha-beta" and placement is None:
            continue
        predictions[name] = baseline.predict(X, names)
    patterns = np.array([r.pattern for r in records])
    return predictions, y, patterns


def evaluate(model_set: CommModelSet, records: Sequence[CommRecord], placement: Placement | None) -> dict:
    predictions, y, patterns = predict_all(model_set, records, placement)
    out: dict = {}
    for name in MODEL_ORDER:
        if name not in predictions:
            continue
        pred = predictions[name]
        per = {p: scores(y[patterns == p], pred[patterns == p]) for p in sorted(set(patterns))}
        per["all"] = scores(y, pred)
        out[name] = per
    return out


def scatter_plots(predictions: dict[str, np.ndarray], measured: np.ndarray, patterns: np.ndarray,
                  out_prefix: str, title: str) -> list[str]:
    """One predicted-vs-measured PNG per model (log-log, ±25 % band); returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    lo, hi = measured.min() / 2, measured.max() * 2
    for name, pred in predictions.items():
        fig, ax = plt.subplots(figsize=(5, 5))
        for p in sorted(set(patterns)):
            mask = patterns == p
            ax.scatter(measured[mask] * 1e6, np.clip(pred[mask], lo, hi) * 1e6, s=6, label=p, alpha=0.6)
        line = np.array([lo, hi]) * 1e6
        ax.plot(line, line, "k-", lw=0.8)
        ax.fill_between(line, line * 0.75, line * 1.25, color="grey", alpha=0.2, label="±25 %")
        ax.set_xscale("log"); ax.set_yscale("log")
        ax.set_xlabel("measured time (µs, SIMULATED)" if "simulated" in title.lower() else "measured time (µs)")
        ax.set_ylabel("predicted time (µs)")
        ax.set_title(f"{title}\n{name}", fontsize=9)
        ax.legend(fontsize=7, markerscale=2)
        fig.tight_layout()
        path = f"{out_prefix}-{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
