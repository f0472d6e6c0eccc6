"""Plot the second-round active-learning study (active_study.json), matplotlib Agg.

    python benchmarks/runtime/plot_active_study.py benchmarks/runtime/active_study.json \
        benchmarks/runtime/active_study.png
"""
from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = (("lammps_active_variants", "LAMMPS (real), 8 seeds"),
          ("surrogate_noise0_pool1000", "smooth LAMMPS-shaped surrogate,\nno noise, 1000 candidates, 5 seeds"))


def main(source: str, target: str) -> None:
    study = json.load(open(source))
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=False)
    for axis, (key, title) in zip(axes, PANELS):
        result = study[key]
        curves = dict(result["mean_curves"])
        if key == "lammps_active_variants":  # plain CoV (as suggest-runs) ran in the main study, same seeds
            curves["random start + active"] = study["lammps"]["mean_curves"]["random start + active"]
        for label, curve in curves.items():
            axis.plot(result["runs"], [100 * v for v in curve], marker="o", markersize=3,
                      label=label.replace("random start + ", ""))
        axis.axhline(100 * result["oracle_mean"], color="grey", linestyle=":", label="oracle (all candidates)")
        axis.set_yscale("log")
        axis.set_xlabel("runs made (configurations)")
        axis.set_ylabel("test MAPE (%)")
        axis.set_title(title, fontsize=9)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(target, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
