"""Plot active learning vs random sampling from results.json (matplotlib, Agg).

    python benchmarks/runtime/plot_results.py benchmarks/runtime/results.json benchmarks/runtime/active_learning.png
"""
from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source: str, target: str) -> None:
    result = json.load(open(source))["active_learning"]
    figure, axes = plt.subplots(figsize=(5, 3.5))
    for label, curve in result["mape"].items():
        axes.plot(result["runs"], [100 * v for v in curve], marker="o", label=label)
    axes.axhline(100 * result["random_final_mape"], color="grey", linestyle=":", label="random, final")
    axes.set_xlabel("runs made (configurations)")
    axes.set_ylabel("test MAPE (%)")
    axes.set_title("LAMMPS melt: ANN ensemble, mean of seeds")
    axes.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
