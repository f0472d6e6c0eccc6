"""Scoring a runtime model on a run table: split by configuration, fit, report seed metrics.

The model scored is the one ``train-runtime`` would serve from the training runs
(:func:`~.training.fit_served`: with ``learner="auto"`` the
cross-validated choice, else the named learner), and its predictions and intervals on the
held-out runs are the daemon's own: the model is written as an artifact, loaded as the daemon
loads it and asked one run at a time (``ApplicationModels.estimate``).

>>> from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
>>> rows = "\\n".join(f"{n},{r},{n * n / 100 * (1 + 0.01 * r)}" for n in range(10, 70, 2) for r in range(2))
>>> table = parse_runs_csv("n,rep,t\\n" + rows, target="t")
>>> result = evaluate(table, learner="extra-trees", train_fraction=0.5, seed=0, params={"n_estimators": 30})
>>> result["n_train"] + result["n_test"], result["features_kept"]
(60, ['n'])
"""
from __future__ import annotations

import numpy as np

import tempfile
from pathlib import Path

from ...runtime.artifacts import SERVABLE
from ...runtime.served import ApplicationModels
from .accuracy import configuration_means, coverage, mape, rank_accuracy, relative_width, repetition_disagreement
from .dataset import RunTable
from .model import RuntimeModel
from .packing import save_application_model
from .reduction import DEFAULT_TIME_SHARE, usable_inputs
from .training import fit_served


def split_by_configuration(groups: np.ndarray, train_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (train, test): a random ``train_fraction`` of configurations, all their reps."""
    if not 0 < train_fraction < 1:
        raise ValueError(f"train fraction must be in (0, 1): {train_fraction}")
    unique = np.unique(groups)
    rng = np.random.default_rng(seed)
    n_train = min(max(1, int(round(train_fraction * unique.size))), unique.size - 1)
    chosen = rng.permutation(unique)[:n_train]
    in_train = np.isin(groups, chosen)
    return np.nonzero(in_train)[0], np.nonzero(~in_train)[0]


def evaluate(table: RunTable, *, learner: str = "extra-trees", train_fraction: float = 0.5, seed: int = 0,
             params: dict | None = None, time_share: float | None = DEFAULT_TIME_SHARE,
             train_rows: np.ndarray | None = None, test_rows: np.ndarray | None = None) -> dict:
    """Fit on a configuration split and score on the held-out configurations."""
    if train_rows is None or test_rows is None:
        train_rows, test_rows = split_by_configuration(table.groups, train_fraction, seed)
    inputs, rt_kept, rt_dropped = usable_inputs(table, train_rows, time_share=time_share)
    params = dict(params or {})
    params.setdefault("random_state", seed)
    test = [table.rows[i] for i in test_rows]
    y = table.y[test_rows]
    cv_scores = selection = None
    if learner == "auto" or learner in SERVABLE:
        model, choice = fit_served(table, train_rows, inputs=inputs, seed=seed,
                                   learners=None if learner == "auto" else {learner: params},
                                   cross_validate_single=False)
        if learner == "auto":
            cv_scores, selection = choice["cv_mape_by_learner"], choice["selection"]
        learner = choice["learner"]
        predicted, low80, high80, low95, high95, not_served = served_predictions(model, test)
    else:  # a learner the daemon cannot serve (the plain linear baseline): scored in-process
        model = RuntimeModel(learner, params, inputs).fit(table, train_rows)
        predicted = model.predict(test)
        (low80, high80), (low95, high95) = model.predict_interval(test, 0.8), model.predict_interval(test, 0.95)
        not_served = None
    result = {
        "learner": learner, "train_fraction": train_fraction, "seed": seed,
        "n_train": int(train_rows.size), "n_test": int(test_rows.size),
        "mape": mape(y, predicted), "rank_accuracy": rank_accuracy(y, predicted),
        "coverage80": coverage(y, low80, high80), "coverage95": coverage(y, low95, high95),
        "interval_width80": relative_width(predicted, low80, high80),
        "features_kept": model.kept_features, "inputs_required": model.required_inputs,
        "runtime_features_kept": rt_kept, "runtime_features_dropped": rt_dropped,
    }
    per_config = configuration_means(table.groups[test_rows], y, predicted)
    if per_config is not None:
        result["mape_configuration_mean"] = mape(*per_config)
    floor = repetition_disagreement(table.groups[test_rows], y)
    if floor is not None:
        result["repetition_mape"] = floor
    if cv_scores is not None:
        result["cv_mape"] = cv_scores
        result["selection"] = selection
    if not_served is not None:
        result["runs_not_served"] = not_served
    return result


def served_predictions(model: RuntimeModel, rows: list[dict]) -> tuple[np.ndarray, ...]:
    """(runtime, low80, high80, low95, high95, runs not served) as the daemon answers them.

    The model is saved and loaded as an artifact and asked one run at a time. A run the served
    model declines (a required input missing) is predicted in-process and counted.
    """
    with tempfile.TemporaryDirectory(prefix="hpcpredict-evaluate-") as folder:
        save_application_model(model, Path(folder), application="evaluated", metadata={"variant": "evaluated"})
        served = ApplicationModels.load(Path(folder))
    out = np.empty((5, len(rows)))
    not_served = 0
    for i, row in enumerate(rows):
        at80 = served.estimate("evaluated", row, 0, 0, 0, coverage=0.8)
        at95 = served.estimate("evaluated", row, 0, 0, 0, coverage=0.95)
        if at80 is None or at95 is None:
            not_served += 1
            (low80,), (high80,) = model.predict_interval([row], 0.8)
            (low95,), (high95,) = model.predict_interval([row], 0.95)
            out[:, i] = model.predict([row])[0], low80, high80, low95, high95
        else:
            out[:, i] = at80.runtime_s, at80.low_s, at80.high_s, at95.low_s, at95.high_s
    return (*out, not_served)
