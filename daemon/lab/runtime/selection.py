"""Which learner to serve for one application: cross-validation on the site's own runs.

Folds are configurations (all repetitions of one configuration on the same side); every run is
predicted once, by the model that did not see its configuration, and scored by its absolute
percentage error. With a few dozen configurations, which learner one fold assignment favours is
partly the luck of which configurations are held out together: the cross-validation is repeated
on :data:`REPEATS` fold assignments and each run's error averaged over them.

The single learners are ordered simplest first (:data:`CANDIDATES`); a richer learner replaces
the current choice only when its mean error per configuration is lower by more than
:data:`SIMPLER_MARGIN` (relative) *and* by more than one standard error of the paired
differences over configurations (Breiman's one-standard-error rule). On small or noisy data the
differences between learners are mostly the folds' luck, and the simple model then generalises
at least as well: so the log-log model is preferred to richer single learners unless the data
show that something richer pays.

Where it can be fitted (:data:`~.gaussian_process.MIN_CONFIGURATIONS` configurations in every
fold), the Gaussian process comes before the log-log model: it holds the log-log trend (a linear
kernel on the log inputs, first order) and bends from it only as far as its marginal likelihood
lets, and it gains more from the fifth of the configurations a fold leaves out than the other
learners do (on development splits its cross-validated MAPE was 1.1-1.5× its held-out MAPE, the
log-log model's 0.9-1.2×), so second in the order it was rarely shown "clearly" better when it
was: NWChem at 50 % training served 1.55× the best learner's held-out MAPE (Gaussian process
4 splits of 6, log-linear 2, at 8.4 and 21 % where the Gaussian process had 4.9 and 8.1 %);
first, 1.08×.

The blend (:mod:`.blend`) is not one more, richer model: it averages, in log space, the Gaussian
process (or, where it cannot be fitted, the log-log model) and two richer learners, a hedge
whose error is at most about the mean of its members' and whose variance is lower than each
member's. The same prior therefore points the other way
for it (:data:`HEDGE`): the blend is served unless the single learners' choice beats *it*
clearly (the same margin and standard error). Its cross-validated errors cost no fits of their
own: its members are candidates, fitted on the same folds with the same seed
(:func:`blend_of_candidates`).

Measured on development splits the benchmarks never score (seeds 100-109 per code and training
fraction, 2026-11-24, ``benchmarks/dev/runtime/selection_study.py``; held-out MAPE of the
learner served over that of the best forced learner, the blend included, at 10 / 25 / 50 %
training): with one fold assignment and the blend as the richest candidate, LAMMPS 1.00 / 1.00 /
1.02, GROMACS 1.10 / 1.01 / 1.01, CP2K 1.10 / 1.04 / 1.05, NWChem 1.06 / 1.03 / 1.17; as now,
LAMMPS 1.00 / 1.03 / 1.00, GROMACS 1.02 / 1.00 / 1.00, CP2K 1.05 / 1.01 / 1.03, NWChem 1.06 /
1.03 / 1.03. The hedge rule on one assignment did as well on GROMACS and CP2K but served the
blend more often where log-linear was better (NWChem 1.07 / 1.05, LAMMPS 1.03 / 1.04 at 10 /
25 %); averaging three assignments took back most of that. With start-up + steps and the
Gaussian process among the candidates, first, and in the blend (seeds 100-105): LAMMPS 1.01 /
1.03 / 1.01, GROMACS 1.42 / 1.17 / 1.00, CP2K 1.21 / 1.00 / 1.06, NWChem 1.34 / 0.96 / 1.08
(at 10 % the Gaussian process cannot be fitted: those choices are start-up + steps' and the
splits').
:func:`selection_report` says which happened, and how the chosen model's error compares
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
>>> pick({"log-linear": steady, "boosted-trees": steady * 0.99, "blend": steady * 0.98})
'blend'
>>> pick({"log-linear": steady, "boosted-trees": steady * 0.99, "blend": steady * 1.02})   # no single wins clearly
'blend'
>>> pick({"log-linear": steady, "boosted-trees": steady * 0.99, "blend": steady * 1.1})
'log-linear'
"""
from __future__ import annotations

import math

import numpy as np

from ...runtime.conformal import group_folds
from .blend import MEMBERS, in_folds, uncalibrated, with_fallback
from .dataset import RunTable
from .learners import LearnerNotApplicable
from .model import RuntimeModel

# Simplest first; the parameters are the served ones (selection fits skip interval calibration).
# The Gaussian process first where it can be fitted (see the module's docstring), then the
# log-log model. The blend (:mod:`.blend`: Gaussian process or log-linear, boosted trees and ANN
# averaged in log space) is the hedge (:data:`HEDGE`); it comes after its members, whose
# out-of-fold predictions its cross-validation reuses.
# The start-up + steps model (:mod:`.startup_steps`) cannot model runs without an input that can be
# a number of steps (positive integers, at least 3 values), the Gaussian process (:mod:`.gaussian_process`)
# runs of too few or too many configurations: each is then skipped.
CANDIDATES: dict[str, dict] = {"gaussian-process": {}, "log-linear": {}, "startup-steps": {}, "extra-trees": {},
                               "boosted-trees": {}, "ann": {}, "blend": {}}
HEDGE = "blend"   # served unless the single learners' choice beats it clearly
SIMPLER_MARGIN = 0.05
REPEATS = 3   # fold assignments each candidate is cross-validated on (see the module's docstring)
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


def out_of_fold_predictions(table: RunTable, rows: np.ndarray, learner: str, params: dict, *,
                            inputs: list[str] | None = None, folds: int = 5, seed: int = 0,
                            fold_seed: int | None = None) -> np.ndarray | None:
    """The prediction of every run in ``rows`` by the model fitted without its configuration.

    Folds drawn with ``fold_seed`` (default ``seed``), models fitted with ``seed``. None when there
    are fewer than 2 configurations, a fold would leave a single run to train on, or the learner
    cannot model these runs (:class:`~.learners.LearnerNotApplicable`).
    """
    groups = table.groups[rows]
    n_folds = min(folds, np.unique(groups).size)
    if n_folds < 2:
        return None
    held_outs = group_folds(groups, n_folds, seed if fold_seed is None else fold_seed)
    if any((~held_out).sum() < 2 for held_out in held_outs):
        return None   # a fold would train on a single run
    predicted = np.empty(rows.size)
    for held_out in held_outs:
        try:
            model = RuntimeModel(learner, dict(without_calibration(learner, params), random_state=seed),
                                 inputs).fit(table, rows[~held_out])
        except LearnerNotApplicable:
            return None
        predicted[held_out] = model.predict([table.rows[i] for i in rows[held_out]])
    return predicted


def out_of_fold_errors(table: RunTable, rows: np.ndarray, learner: str, params: dict, *,
                       inputs: list[str] | None = None, folds: int = 5, seed: int = 0,
                       fold_seed: int | None = None) -> np.ndarray | None:
    """Absolute percentage error of every run in ``rows``, predicted without its configuration
    (:func:`out_of_fold_predictions`)."""
    predicted = out_of_fold_predictions(table, rows, learner, params, inputs=inputs, folds=folds, seed=seed,
                                        fold_seed=fold_seed)
    return None if predicted is None else np.abs(predicted - table.y[rows]) / table.y[rows]


def blend_of_candidates(params: dict, candidates: dict[str, dict]) -> tuple[str, ...] | None:
    """The blend's members when each is also a candidate with the parameters it has in the blend.

    Cross-validated with the same folds and seed, the blend's out-of-fold prediction is then the
    geometric mean of those candidates' (its members are fitted exactly as they are alone), so
    the blend costs no fits of its own. None otherwise (the blend is cross-validated by itself).
    """
    members = tuple(params.get("members", MEMBERS))
    member_params = params.get("member_params") or {}

    def unseeded(p: dict | None) -> dict:   # cross-validation fits every learner with its seed
        return {key: value for key, value in (p or {}).items() if key != "random_state"}

    if set(member_params) <= set(members) and all(
            name in candidates and name != "blend" and unseeded(candidates[name]) == unseeded(member_params.get(name))
            for name in members):
        return members
    return None


def cross_validated_mape(table: RunTable, rows: np.ndarray, learner: str, params: dict, *,
                         inputs: list[str] | None = None, folds: int = 5, seed: int = 0) -> float:
    errors = out_of_fold_errors(table, rows, learner, params, inputs=inputs, folds=folds, seed=seed)
    return float("nan") if errors is None else float(errors.mean())


def per_configuration(groups: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """Mean error of each configuration (repetitions are not independent evidence)."""
    _, index = np.unique(groups, return_inverse=True)
    return np.bincount(index, weights=errors) / np.bincount(index)


def clearly_better(candidate: np.ndarray, incumbent: np.ndarray, margin: float = SIMPLER_MARGIN) -> bool:
    """Whether ``candidate``'s errors (per configuration) are lower than ``incumbent``'s by more
    than ``margin`` of the incumbent's mean and by more than one standard error of the paired
    differences."""
    difference = candidate - incumbent
    n = difference.size
    standard_error = difference.std(ddof=1) / math.sqrt(n) if n > 1 else math.inf
    return bool(-difference.mean() > max(margin * incumbent.mean(), standard_error))


def pick(errors: dict[str, np.ndarray | None], margin: float = SIMPLER_MARGIN) -> str:
    """The simplest single learner that no richer one beats clearly; the blend unless that
    learner beats the blend clearly.

    ``errors``: per candidate, simplest first, the cross-validated error of each configuration
    (same configurations, same order), or None when it could not be cross-validated. "Clearly":
    :func:`clearly_better`.
    """
    usable = {name: np.asarray(e, dtype=float) for name, e in errors.items() if e is not None and len(e)}
    if not usable:
        return next(iter(errors))  # too few configurations to cross-validate: the simplest
    chosen = None
    for name, candidate in usable.items():
        if name != HEDGE and (chosen is None or clearly_better(candidate, usable[chosen], margin)):
            chosen = name
    if HEDGE in usable and (chosen is None or not clearly_better(usable[chosen], usable[HEDGE], margin)):
        return HEDGE
    assert chosen is not None   # usable holds a learner other than HEDGE, else HEDGE was returned
    return chosen


def candidates_out_of_fold_errors(table: RunTable, rows: np.ndarray, candidates: dict[str, dict], *,
                                  inputs: list[str] | None, folds: int, seed: int,
                                  fold_seed: int) -> dict[str, np.ndarray | None]:
    """Every candidate's :func:`out_of_fold_errors` on the folds drawn with ``fold_seed``; a blend
    whose members are candidates (:func:`blend_of_candidates`) from theirs, without fits of its own."""
    predicted: dict[str, np.ndarray | None] = {}
    for name, params in candidates.items():   # a blend's members come before it (CANDIDATES' order)
        members = blend_of_candidates(params, candidates) if name == "blend" else None
        if members and all(member in predicted for member in members):
            chosen = with_fallback(predicted, members)   # as the blend fits: the fallback for a member it cannot fit
            predicted[name] = None if chosen is None else np.exp(np.mean(np.log(chosen), axis=0))
        else:
            predicted[name] = out_of_fold_predictions(table, rows, name, params, inputs=inputs, folds=folds,
                                                      seed=seed, fold_seed=fold_seed)
    y = table.y[rows]
    return {name: None if p is None else np.abs(p - y) / y for name, p in predicted.items()}


def mean_over_repeats(errors: list[np.ndarray | None]) -> np.ndarray | None:
    """Each run's mean error over the repeats; None when a repeat could not cross-validate."""
    known = [e for e in errors if e is not None]
    return np.mean(known, axis=0) if len(known) == len(errors) else None


def select_learner(table: RunTable, rows: np.ndarray, *, inputs: list[str] | None = None,
                   candidates: dict[str, dict] | None = None, folds: int = 5, seed: int = 0,
                   repeats: int = REPEATS) -> tuple[str, dict]:
    """The learner to serve (:func:`pick`) and every candidate's cross-validated MAPE.

    Cross-validation is repeated on ``repeats`` fold assignments (drawn with seeds ``seed``,
    ``seed + 1``, ...; every fit with ``seed``), and each run's error is its mean over them.
    """
    candidates = CANDIDATES if candidates is None else candidates
    runs = [candidates_out_of_fold_errors(table, rows, candidates, inputs=inputs, folds=folds, seed=seed,
                                          fold_seed=seed + repeat) for repeat in range(max(1, repeats))]
    errors = {name: mean_over_repeats([run[name] for run in runs]) for name in candidates}
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
    simplest = next(iter(scores))
    best = min(finite, key=finite.__getitem__) if finite else simplest   # without finite scores: unused
    clearly = f"by > {SIMPLER_MARGIN:.0%} and > 1 standard error"
    if not finite:
        reason = f"too few configurations to cross-validate: the simplest candidate ({simplest}) is served"
    elif chosen == HEDGE:
        singles = {name: score for name, score in finite.items() if name != HEDGE}
        best_single = min(singles, key=singles.__getitem__) if singles else None
        versus = f", best single: {best_single} {singles[best_single]:.1%}" if best_single is not None else ""
        reason = (f"no single learner beats the {HEDGE} of its members clearly ({clearly}; {HEDGE} "
                  f"{finite[HEDGE]:.1%}{versus}): the {HEDGE} is served")
    elif chosen == simplest and best != simplest:
        reason = (f"no richer learner beats {simplest} clearly ({clearly}; "
                  f"best: {best} {finite[best]:.1%} vs {finite[simplest]:.1%}): the simple model is served")
    elif chosen == simplest:
        reason = f"{simplest} has the lowest cross-validated MAPE"
    else:
        reason = f"{chosen} beats the simpler candidates clearly ({clearly})"
    if chosen != HEDGE and chosen in finite and HEDGE in finite:
        reason += f"; it beats the {HEDGE} clearly ({finite[chosen]:.1%} vs {finite[HEDGE]:.1%})"
    report = {"reason": reason, "simple_model_served": chosen == simplest, "repetition_mape": noise}
    if noise is not None and chosen in finite:
        report["at_noise_floor"] = bool(finite[chosen] <= NOISE_FACTOR * noise)
    return report
