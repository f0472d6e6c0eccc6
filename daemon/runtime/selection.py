"""Which learner to serve for one application: cross-validation on the site's own runs.

Folds are configurations (all repetitions of one configuration on the same side); every run is
predicted once, by the model that did not see its configuration, and scored by its absolute
percentage error. The candidates are ordered simplest first (:data:`CANDIDATES`); a richer
learner replaces the current choice only when its mean error per configuration is lower by more
than :data:`SIMPLER_MARGIN` (relative) *and* by more than one standard error of the paired
differences over configurations (Breiman's one-standard-error rule). On small or noisy data the
differences between learners are mostly the folds' luck, and the simple model then generalises
at least as well: so the log-log model is served unless the data show that something richer
pays. :func:`selection_report` says which happened, and how the chosen model's error compares
with the repetition noise of the runs (the floor no model of the inputs can go below).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> base = rng.uniform(0.05, 0.15, 40)
>>> pick({"log-linear": base, "extra-trees": base - 0.002, "ann": base * 0.7})
'ann'
>>> pick({"log-linear": base, "extra-trees": base - 0.002, "ann": base * 0.97})
'log-linear'
>>> steady = np.full(40, 0.2)      # 10 % better on average: steadily, or erratically
>>> pick({"log-linear": steady, "ann": steady - 0.02 + np.resize([0.01, -0.01], 40)})
'ann'
>>> pick({"log-linear": steady, "ann": steady - 0.02 + np.resize([0.15, -0.15], 40)})
'log-linear'
"""
from __future__ import annotations

import math

import numpy as np

from .blend import MEMBERS, in_folds, uncalibrated
from .conformal import group_folds
from .dataset import RunTable
from .model import LearnerNotApplicable, RuntimeModel

# Simplest first; the parameters are the served ones (selection fits skip interval calibration).
# The blend (:mod:`.blend`: log-linear, boosted trees and ANN averaged in log space) is last: it
# holds the richest of them.
# The start-up + steps model (:mod:`.startup_steps`) cannot model runs without an input that can be
# a number of steps (positive integers, at least 3 values): it is then skipped.
CANDIDATES: dict[str, dict] = {"log-linear": {}, "startup-steps": {}, "extra-trees": {}, "boosted-trees": {}, "ann": {},
                               "blend": {}}
SIMPLER_MARGIN = 0.05
NOISE_FACTOR = 1.3   # "at the noise floor": within this factor of the repetition noise


def without_calibration(learner: str, params: dict) -> dict:
    """Parameters for a fit whose intervals are not used (cross-validation folds).

    Interval calibration (and boosting's quantile models) do not change point predictions: they
    are skipped (a blend's members too). The ANN ensemble has no such switch; its cross-validation
    fits (alone or in a blend) use at most 5 members (its default is 10: a 10-member ensemble per
    fold costs more than every other candidate together), which makes its cross-validated MAPE
    slightly pessimistic.
    """
    if learner == "ann":
        return in_folds("ann", params)
    if learner == "blend":  # its members as alone, its own calibration skipped too
        member_params = dict(params.get("member_params") or {})
        if "ann" in params.get("members", MEMBERS):
            member_params["ann"] = without_calibration("ann", member_params.get("ann") or {})
        return dict(params, calibration_folds=0, member_params=member_params)
    return uncalibrated(learner, params)


def out_of_fold_errors(table: RunTable, rows: np.ndarray, learner: str, params: dict, *,
                       inputs: list[str] | None = None, folds: int = 5, seed: int = 0) -> np.ndarray | None:
    """Absolute percentage error of every run in ``rows``, predicted without its configuration.

    None when there are fewer than 2 configurations, a fold would leave a single run to train on,
    or the learner cannot model these runs (:class:`~.model.LearnerNotApplicable`).
    """
    groups = table.groups[rows]
    n_folds = min(folds, np.unique(groups).size)
    if n_folds < 2:
        return None
    folds = group_folds(groups, n_folds, seed)
    if any((~held_out).sum() < 2 for held_out in folds):
        return None   # a fold would train on a single run
    errors = np.empty(rows.size)
    for held_out in folds:
        try:
            model = RuntimeModel(learner, dict(without_calibration(learner, params), random_state=seed),
                                 inputs).fit(table, rows[~held_out])
        except LearnerNotApplicable:
            return None
        test = rows[held_out]
        errors[held_out] = np.abs(model.predict([table.rows[i] for i in test]) - table.y[test]) / table.y[test]
    return errors


def cross_validated_mape(table: RunTable, rows: np.ndarray, learner: str, params: dict, *,
                         inputs: list[str] | None = None, folds: int = 5, seed: int = 0) -> float:
    errors = out_of_fold_errors(table, rows, learner, params, inputs=inputs, folds=folds, seed=seed)
    return float("nan") if errors is None else float(errors.mean())


def per_configuration(groups: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """Mean error of each configuration (repetitions are not independent evidence)."""
    _, index = np.unique(groups, return_inverse=True)
    return np.bincount(index, weights=errors) / np.bincount(index)


def pick(errors: dict[str, np.ndarray | None], margin: float = SIMPLER_MARGIN) -> str:
    """The simplest candidate that no richer one beats clearly.

    ``errors``: per candidate, simplest first, the cross-validated error of each configuration
    (same configurations, same order), or None when it could not be cross-validated. A richer
    candidate replaces the current choice when its mean is lower by more than ``margin`` of the
    choice's mean and by more than one standard error of the paired differences.
    """
    usable = {name: np.asarray(e, dtype=float) for name, e in errors.items() if e is not None and len(e)}
    if not usable:
        return next(iter(errors))  # too few configurations to cross-validate: the simplest
    chosen = next(iter(usable))
    for name, candidate in usable.items():
        difference = candidate - usable[chosen]
        n = difference.size
        standard_error = difference.std(ddof=1) / math.sqrt(n) if n > 1 else math.inf
        if -difference.mean() > max(margin * usable[chosen].mean(), standard_error):
            chosen = name
    return chosen


def select_learner(table: RunTable, rows: np.ndarray, *, inputs: list[str] | None = None,
                   candidates: dict[str, dict] | None = None, folds: int = 5, seed: int = 0) -> tuple[str, dict]:
    """The learner to serve (:func:`pick`) and every candidate's cross-validated MAPE."""
    candidates = CANDIDATES if candidates is None else candidates
    errors = {name: out_of_fold_errors(table, rows, name, params, inputs=inputs, folds=folds, seed=seed)
              for name, params in candidates.items()}
    groups = table.groups[rows]
    by_configuration = {name: None if e is None else per_configuration(groups, e) for name, e in errors.items()}
    scores = {name: float("nan") if e is None else float(e.mean()) for name, e in errors.items()}
    return pick(by_configuration), scores


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
        reason = (f"no richer learner beats {simplest} clearly (by > {SIMPLER_MARGIN:.0%} and > 1 standard "
                  f"error; best: {best} {finite[best]:.1%} vs {finite[simplest]:.1%}): the simple model is served")
    elif chosen == simplest:
        reason = f"{simplest} has the lowest cross-validated MAPE"
    else:
        reason = f"{chosen} beats the simpler candidates clearly (by > {SIMPLER_MARGIN:.0%} and > 1 standard error)"
    report = {"reason": reason, "simple_model_served": chosen == simplest, "repetition_mape": noise}
    if noise is not None and chosen in finite:
        report["at_noise_floor"] = bool(finite[chosen] <= NOISE_FACTOR * noise)
    return report
