"""Which learner to serve for one application: cross-validation on the site's own runs.

Folds are configurations (all repetitions of one configuration on the same side), scored by
MAPE. The candidates are ordered simplest first (:data:`CANDIDATES`); a richer learner is
chosen only when its cross-validated MAPE beats every simpler one's by more than
:data:`SIMPLER_MARGIN` (relative). On small or noisy data the differences between learners are
mostly the folds' luck, and the simple model then generalises at least as well: so the log-log
model is served unless the data show that something richer pays. :func:`selection_report` says
which happened, and how the chosen model's error compares with the repetition noise of the
runs (the floor no model of the inputs can go below).

>>> pick({"log-linear": 0.10, "extra-trees": 0.098, "ann": 0.07})
'ann'
>>> pick({"log-linear": 0.10, "extra-trees": 0.098, "ann": 0.097})
'log-linear'
"""
from __future__ import annotations

import math

import numpy as np

from .conformal import group_folds
from .dataset import RunTable
from .metrics import mape
from .model import RuntimeModel

# Simplest first; the parameters are the served ones (selection fits skip interval calibration).
CANDIDATES: dict[str, dict] = {"log-linear": {}, "extra-trees": {}, "boosted-trees": {}, "ann": {}}
SIMPLER_MARGIN = 0.05
NOISE_FACTOR = 1.3   # "at the noise floor": within this factor of the repetition noise


def without_calibration(learner: str, params: dict) -> dict:
    """Parameters for a fit whose intervals are not used (cross-validation folds).

    Interval calibration (and boosting's quantile models) do not change point predictions: they
    are skipped. The ANN ensemble has no such switch; its cross-validation fits use at most 5
    members (its default is 10: a 10-member ensemble per fold costs more than every other
    candidate together), which makes its cross-validated MAPE slightly pessimistic.
    """
    if learner == "ann":
        return dict(params, n_members=min(5, params.get("n_members", 10)))
    if learner == "boosted-trees":
        return dict(params, calibration_folds=0, interval="constant")
    return dict(params, calibration_folds=0)


def cross_validated_mape(table: RunTable, rows: np.ndarray, learner: str, params: dict, *,
                         inputs: list[str] | None = None, folds: int = 5, seed: int = 0) -> float:
    groups = table.groups[rows]
    n_folds = min(folds, np.unique(groups).size)
    if n_folds < 2:
        return float("nan")
    errors = []
    for held_out in group_folds(groups, n_folds, seed):
        model = RuntimeModel(learner, dict(without_calibration(learner, params), random_state=seed),
                             inputs).fit(table, rows[~held_out])
        test = rows[held_out]
        errors.append(mape(table.y[test], model.predict([table.rows[i] for i in test])))
    return float(np.mean(errors))


def pick(scores: dict[str, float], margin: float = SIMPLER_MARGIN) -> str:
    """The simplest candidate (``scores`` in simplest-first order) that no richer one beats by > margin."""
    finite = {name: score for name, score in scores.items() if math.isfinite(score)}
    if not finite:
        return next(iter(scores))  # too few configurations to cross-validate: the simplest
    chosen = next(iter(finite))
    for name, score in finite.items():
        if score < finite[chosen] * (1 - margin):
            chosen = name
    return chosen


def select_learner(table: RunTable, rows: np.ndarray, *, inputs: list[str] | None = None,
                   candidates: dict[str, dict] | None = None, folds: int = 5, seed: int = 0) -> tuple[str, dict]:
    """The learner to serve (:func:`pick`) and every candidate's cross-validated MAPE."""
    candidates = CANDIDATES if candidates is None else candidates
    scores = {name: cross_validated_mape(table, rows, name, params, inputs=inputs, folds=folds, seed=seed)
              for name, params in candidates.items()}
    return pick(scores), scores


def selection_report(chosen: str, scores: dict[str, float], noise: float | None) -> dict:
    """Why ``chosen`` was served, in words and numbers (stored in the artifact's metadata).

    ``noise``: the repetition disagreement of the training runs (MAPE of predicting a run by
    its configuration's other repetitions), None without repetitions.
    """
    finite = {name: score for name, score in scores.items() if math.isfinite(score)}
    best = min(finite, key=finite.get) if finite else None
    simplest = next(iter(scores))
    if not finite:
        reason = f"too few configurations to cross-validate: the simplest candidate ({simplest}) is served"
    elif chosen == simplest and best != simplest:
        reason = (f"no richer learner beats {simplest} by more than {SIMPLER_MARGIN:.0%} "
                  f"(best: {best} {finite[best]:.1%} vs {finite[simplest]:.1%}): the simple model is served")
    elif chosen == simplest:
        reason = f"{simplest} has the lowest cross-validated MAPE"
    else:
        reason = f"{chosen} beats every simpler candidate by more than {SIMPLER_MARGIN:.0%}"
    report = {"reason": reason, "simple_model_served": chosen == simplest, "repetition_mape": noise}
    if noise is not None and chosen in finite:
        report["at_noise_floor"] = bool(finite[chosen] <= NOISE_FACTOR * noise)
    return report
