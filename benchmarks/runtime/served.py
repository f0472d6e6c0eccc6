"""Accuracy of the model the daemon actually serves (issue 6).

For each configuration split: the training runs are written to a CSV, ``train_application``
(what ``hpcpredict train-runtime`` runs) chooses the learner by 5-fold CV on them and writes
the pickle-free artifact, ``ApplicationModels.load`` reads it back, and every held-out run is
predicted through ``ApplicationModels.estimate`` — the Predict hot path.

    nice -n 10 python benchmarks/runtime/run_benchmarks.py --out benchmarks/runtime/results.json --only served
"""
from __future__ import annotations

import csv
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.runtime import (coverage, mape, rank_accuracy, read_runs_csv, relative_width,
                                           split_by_configuration, train_application)
from hpcpredict.daemon.runtime.served import ApplicationModels


def _subset_csv(source: Path, rows: np.ndarray, out: Path) -> None:
    with open(source, newline="") as handle:
        lines = [line for line in csv.reader(handle) if line and any(cell.strip() for cell in line)]
    header, body = lines[0], lines[1:]
    with open(out, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(body[i] for i in rows)


def served_accuracy(data: Path, target: str, seeds: list[int], fractions=(0.1, 0.25, 0.5),
                    learners: dict | None = None, label: str = "") -> list[dict]:
    table = read_runs_csv(data, target=target)
    results = []
    for fraction in fractions:
        per_seed = []
        for seed in seeds:
            train, test = split_by_configuration(table.groups, fraction, seed)
            with tempfile.TemporaryDirectory() as folder:
                subset = Path(folder) / "train.csv"
                _subset_csv(data, train, subset)
                assert len(read_runs_csv(subset, target=target).y) == train.size
                started = time.time()
                summary = train_application(subset, target=target, application="app", directory=Path(folder) / "m",
                                            seed=seed, learners=learners)
                train_s = time.time() - started
                models = ApplicationModels.load(Path(folder) / "m")
            predicted, low80, high80, low95, high95 = (np.empty(test.size) for _ in range(5))
            for k, i in enumerate(test):
                e80 = models.estimate("app", table.rows[i], nodes=0, ntasks=0, cpus_per_task=0, coverage=0.8)
                e95 = models.estimate("app", table.rows[i], nodes=0, ntasks=0, cpus_per_task=0, coverage=0.95)
                predicted[k], low80[k], high80[k] = e80.runtime_s, e80.low_s, e80.high_s
                low95[k], high95[k] = e95.low_s, e95.high_s
            y = table.y[test]
            meta = summary["inputs"]
            per_seed.append({"mape": mape(y, predicted), "rank_accuracy": rank_accuracy(y, predicted),
                             "coverage80": coverage(y, low80, high80), "coverage95": coverage(y, low95, high95),
                             "interval_width80": relative_width(predicted, low80, high80),
                             "learner": meta["learner"], "cv_mape_by_learner": meta["cv_mape_by_learner"],
                             "train_s": train_s, "n_train": int(train.size)})
            print(json.dumps(dict(per_seed[-1], fraction=fraction, seed=seed)), flush=True)
        row = {"dataset": label or data.name, "train_fraction": fraction, "seeds": seeds,
               "n_train": int(np.mean([r["n_train"] for r in per_seed])),
               "learners_chosen": dict(Counter(r["learner"] for r in per_seed)),
               "cv_mape_by_learner": [r["cv_mape_by_learner"] for r in per_seed],
               "train_s": float(np.mean([r["train_s"] for r in per_seed]))}
        for key in ("mape", "rank_accuracy", "coverage80", "coverage95", "interval_width80"):
            row[key] = float(np.mean([r[key] for r in per_seed]))
        results.append(row)
        print(json.dumps(row), flush=True)
    return results
