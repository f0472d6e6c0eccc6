"""Start-up + steps × per-step cost: runtime = exp(s(x)) + n · exp(w(x)).

A time-stepping code (GROMACS, LAMMPS) spends a start-up that does not depend on the number of
steps n (launching ranks, reading inputs, planning FFTs) and then n steps of a cost per step.
The two follow different inputs: GROMACS's start-up is mostly FFTW planning the PME grid, so it
follows the grid length GROMACS picks and the ranks (not monotonically: 2 ranks, grid 24 →
0.81 s, 25 → 0.28 s), while the per-step cost is smooth in the box and the cut-off. A product of
powers of the inputs (:mod:`.loglinear`) or a tree on log runtime cannot express the sum; this
learner fits it: s and w are each linear in the (log) inputs other than n, one-hot categories
included (a categorical derived input such as the PME grid length gives the start-up one level
per value), by :func:`scipy.optimize.least_squares` on log runtime, with a ridge penalty on the
standardized non-intercept coefficients. Fitted on each configuration's mean log runtime, like
:func:`~.loglinear.fit_log_trend` with groups.

Which input is n (``steps=None``): chosen by cross-validation over configuration folds among the
numeric inputs whose training values are positive integers with at least 3 distinct values
(GROMACS ``nsteps``, LAMMPS ``steps``; the box counts of LAMMPS qualify too and lose); then the
penalty among :data:`PENALTIES`, the same way. Runs without such an input cannot be modelled:
``fit`` raises :class:`~.learners.LearnerNotApplicable` (a ``ValueError``), which the learner choice
(:mod:`.selection`) takes as "skip this candidate".

Interval: cross-conformal over configuration folds on |log y − m| (a constant factor), as
:class:`~.loglinear.LogLinearRuntime`: the fold models keep the served steps input and penalty.

Products of pairs of inputs in the start-up (``interactions="startup"``: grid × ranks, so each
rank count has its own start-up per grid) pay on some codes and not on others, so by default
(``"choose"``) the same cross-validation picks first order or ``"startup"``. Measured 2026-11-24,
grouped 5-fold CV on the training configurations of 6 splits (50 / 25 % training), first order
→ ``"startup"``: GROMACS (PME grid length as a categorical input) 4.7 → 3.2 % / 6.1 → 4.3 %,
LAMMPS 9.9 → 9.7 % / 10.5 → 10.8 %, CP2K 7.1 → 7.3 % / 8.9 → 10.0 %, NWChem 11.2 → 12.9 % /
15.6 → 18.5 %. Pairs in both parts (``True``) were never the best.

>>> import numpy as np
>>> X = np.array([[n, p] for n in (100.0, 200.0, 400.0, 800.0) for p in (1.0, 2.0, 4.0)])
>>> y = 0.5 * X[:, 1] + X[:, 0] * 0.01 / X[:, 1]     # start-up grows with ranks, steps shrink
>>> model = StartupStepsRuntime(random_state=0).fit(X, y, feature_names=["steps", "ranks"])
>>> model.steps_name_
'steps'
>>> [round(float(v), 1) for v in model.predict(np.array([[0.0, 2.0], [1000.0, 2.0]]))]
[1.0, 6.0]
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ...runtime.artifacts import StartupStepsPredictor
from ...runtime.compiled import fill_and_log, with_pairs
from ...runtime.conformal import trainable_folds
from .learners import LearnerNotApplicable, register_learner
from .loglinear import LogNormalPredictions, all_pairs, check_runtimes, runtime_tags
from .packing import trend_arrays

PENALTIES = (1e-3, 3e-3, 1e-2, 3e-2)   # per configuration: mean squared log error + penalty · Σ coef²
CHOICE_PENALTY = 1e-2                  # the penalty while the steps input is chosen
CHOICE_FOLDS = 5
MIN_STEP_VALUES = 3
STARTUP_SHARE = 0.3                    # initial start-up: this share of the shortest run


def step_columns(X: np.ndarray, feature_names=None) -> list[int]:
    """Columns that can be the number of steps: numeric (not a one-hot), training values positive
    integers with at least :data:`MIN_STEP_VALUES` distinct ones.

    >>> step_columns(np.array([[100, 2.5, 1], [200, 2.6, 0], [300, 2.7, 1]]), ["nsteps", "box", "rf=yes"])
    [0]
    """
    found = []
    for j in range(X.shape[1]):
        if feature_names is not None and "=" in str(feature_names[j]):
            continue
        values = X[:, j][~np.isnan(X[:, j])]
        if (values.size and np.all(values > 0) and np.all(values == np.round(values))
                and np.unique(values).size >= MIN_STEP_VALUES):
            found.append(j)
    return found


def _terms(X, fill, log_columns, steps, startup_pairs, step_pairs):
    """(the features of s and of w: every input but the steps, logged where positive, and the
    products of ``*_pairs``; the number of steps of each row, ≥ 0)."""
    L = fill_and_log(X, fill, log_columns)
    L[:, steps] = 0.0
    n = np.where(np.isnan(X[:, steps]), fill[steps], X[:, steps])
    return with_pairs(L, startup_pairs), with_pairs(L, step_pairs), np.maximum(n, 0.0)


def two_part_log(Fs, Fw, n, startup_coef, startup_intercept, step_coef, step_intercept) -> np.ndarray:
    """log(exp(s) + n · exp(w)) per row (n = 0: the start-up alone)."""
    with np.errstate(divide="ignore"):
        return np.logaddexp(Fs @ startup_coef + startup_intercept, np.log(n) + Fw @ step_coef + step_intercept)


def _standardized(F, unused):
    mean, std = F.mean(axis=0), F.std(axis=0)
    std = np.where((std > 0) & ~unused, std, 1.0)
    return np.hstack([np.ones((F.shape[0], 1)), np.where(unused, 0.0, (F - mean) / std)]), mean, std


def fit_two_part(Fs: np.ndarray, Fw: np.ndarray, n: np.ndarray, log_y: np.ndarray, penalty: float,
                 unused_s: np.ndarray, unused_w: np.ndarray):
    """(startup_coef, startup_intercept, step_coef, step_intercept) minimising the mean squared
    error of log runtime + ``penalty`` × the squares of the standardized coefficients (columns in
    ``unused_*`` are left out). Start: the start-up a share of the shortest run, w a ridge fit of
    the log of the rest per step."""
    m, ks, kw = len(log_y), Fs.shape[1], Fw.shape[1]
    design_s, mean_s, std_s = _standardized(Fs, unused_s)
    design_w, mean_w, std_w = _standardized(Fw, unused_w)
    startup0 = STARTUP_SHARE * float(np.exp(log_y.min()))
    target = np.log(np.maximum(np.exp(log_y) - startup0, 1e-12) / np.maximum(n, 1.0))
    Z = design_w[:, 1:]
    b = np.linalg.solve(Z.T @ Z + m * penalty * np.eye(kw), Z.T @ (target - target.mean()))
    start = np.concatenate([[np.log(startup0)], np.zeros(ks), [target.mean()], b])
    root_m, root_penalty = np.sqrt(m), np.sqrt(penalty)
    log_n = np.log(np.maximum(n, 1e-300))
    penalty_rows = np.zeros((ks + kw, ks + kw + 2))
    penalty_rows[np.arange(ks), 1 + np.arange(ks)] = root_penalty
    penalty_rows[ks + np.arange(kw), ks + 2 + np.arange(kw)] = root_penalty

    def residuals(p):
        a, w = p[:ks + 1], p[ks + 1:]
        fit = np.logaddexp(design_s @ a, log_n + design_w @ w)
        return np.concatenate([(fit - log_y) / root_m, root_penalty * a[1:], root_penalty * w[1:]])

    def jacobian(p):
        s, t = design_s @ p[:ks + 1], log_n + design_w @ p[ks + 1:]
        share = np.exp(s - np.logaddexp(s, t))[:, None]     # d fit / d s: the start-up's share
        return np.vstack([np.hstack([share * design_s, (1 - share) * design_w]) / root_m, penalty_rows])

    p = least_squares(residuals, start, jac=jacobian, method="trf").x
    coef_s, coef_w = p[1:ks + 1] / std_s, p[ks + 2:] / std_w
    return coef_s, float(p[0] - coef_s @ mean_s), coef_w, float(p[ks + 1] - coef_w @ mean_w)


@register_learner("startup-steps", served=StartupStepsPredictor)
class StartupStepsRuntime(LogNormalPredictions, RegressorMixin, BaseEstimator):
    """runtime = exp(s(x)) + n · exp(w(x)); see the module.

    ``steps``: the column of the number of steps (index, or name in ``feature_names``), or None
    to choose it by cross-validation. ``penalties``: the candidate ridge penalties.
    ``interactions``: False (first order), "startup" (products of pairs of inputs in s), True (in
    s and w), or "choose" (False or "startup", by cross-validation).
    """

    def __init__(self, steps=None, penalties=PENALTIES, interactions="choose", calibration_folds=20,
                 random_state=None):
        self.steps = steps
        self.penalties = penalties
        self.interactions = interactions
        self.calibration_folds = calibration_folds
        self.random_state = random_state

    def __sklearn_tags__(self):
        return runtime_tags(super().__sklearn_tags__())

    @staticmethod
    def _pairs(n_inputs, steps, interactions):
        """(pairs of s, pairs of w) by ``interactions``: False, True (both), "startup" (s only)."""
        pairs = all_pairs(n_inputs)
        pairs = pairs[(pairs[:, 0] != steps) & (pairs[:, 1] != steps)]
        none = np.zeros((0, 2), dtype=np.int64)
        return (pairs if interactions else none), (pairs if interactions is True else none)

    def _fit_parts(self, X, y, groups, steps, penalty, interactions):
        """(fill, log_columns, startup_pairs, step_pairs, startup_coef, startup_intercept, step_coef,
        step_intercept)."""
        n_inputs = X.shape[1]
        fill = np.nanmedian(X, axis=0) if X.shape[0] else np.zeros(n_inputs)
        fill = np.where(np.isnan(fill), 0.0, fill)
        log_columns = np.all(np.where(np.isnan(X), fill, X) > 0, axis=0)
        startup_pairs, step_pairs = self._pairs(n_inputs, steps, interactions)
        Fs, Fw, n = _terms(X, fill, log_columns, steps, startup_pairs, step_pairs)
        _, first, index = np.unique(groups, return_index=True, return_inverse=True)
        log_y = np.bincount(index, weights=np.log(y)) / np.bincount(index)
        unused_s, unused_w = np.zeros(Fs.shape[1], dtype=bool), np.zeros(Fw.shape[1], dtype=bool)
        unused_s[steps] = unused_w[steps] = True
        parts = fit_two_part(Fs[first], Fw[first], n[first], log_y, penalty, unused_s, unused_w)
        return (fill, log_columns, startup_pairs, step_pairs) + parts

    @staticmethod
    def _predict_parts(parts, X, steps) -> np.ndarray:
        fill, log_columns, startup_pairs, step_pairs, *coefficients = parts
        return two_part_log(*_terms(X, fill, log_columns, steps, startup_pairs, step_pairs), *coefficients)

    def _cv_error(self, X, y, groups, folds, steps, penalty, interactions) -> float:
        total = 0.0
        for held_out in folds:
            parts = self._fit_parts(X[~held_out], y[~held_out], groups[~held_out], steps, penalty, interactions)
            with np.errstate(over="ignore"):   # a fold fit that diverges scores inf and loses
                predicted = np.exp(self._predict_parts(parts, X[held_out], steps))
            total += np.sum(np.abs(predicted - y[held_out]) / y[held_out])
        return total

    def _steps_candidates(self, X, feature_names) -> list[int]:
        names = list(feature_names) if feature_names is not None else None
        found = step_columns(X, names)
        if self.steps is None:
            if not found:
                raise LearnerNotApplicable("start-up + steps model: no input is a number of steps (a numeric input "
                                           f"whose values are positive integers, at least {MIN_STEP_VALUES} distinct)")
            return found
        if isinstance(self.steps, str):
            if names is None or self.steps not in names:
                raise ValueError(f"start-up + steps model: no input named {self.steps!r}")
            column = names.index(self.steps)
        else:
            column = int(self.steps)
            if not 0 <= column < X.shape[1]:
                raise ValueError(f"start-up + steps model: no input column {self.steps!r}")
        if column not in found:
            raise LearnerNotApplicable(f"start-up + steps model: input {self.steps!r} is not a number of steps "
                                       f"(positive integers, at least {MIN_STEP_VALUES} distinct)")
        return [column]

    def fit(self, X, y, groups=None, feature_names=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        y = y.astype(float)
        check_runtimes(y)
        penalties = [float(p) for p in (self.penalties or ())]
        if not penalties or any(not p > 0 for p in penalties):
            raise ValueError(f"penalties must be positive numbers: {self.penalties!r}")
        if self.interactions not in (False, True, "startup", "choose"):
            raise ValueError(f"interactions must be False, True, 'startup' or 'choose': {self.interactions!r}")
        options = [False, "startup"] if self.interactions == "choose" else [self.interactions]
        candidates = self._steps_candidates(X, feature_names)
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        seed = np.random.RandomState(self.random_state).randint(2**31 - 1)
        n_folds = min(CHOICE_FOLDS, np.unique(groups).size)
        folds = trainable_folds(groups, n_folds, seed, min_train=4) if n_folds >= 3 else []
        steps, penalty = candidates[0], (CHOICE_PENALTY if CHOICE_PENALTY in penalties else penalties[0])
        interactions = options[0]
        if folds and len(candidates) > 1:
            by_column = {column: self._cv_error(X, y, groups, folds, column, penalty, interactions)
                         for column in candidates}
            steps = min(by_column, key=by_column.__getitem__)
        if folds and len(options) > 1:
            by_option = {option: self._cv_error(X, y, groups, folds, steps, penalty, option) for option in options}
            interactions = min(by_option, key=by_option.__getitem__)
        if folds and len(penalties) > 1:
            by_penalty = {p: self._cv_error(X, y, groups, folds, steps, p, interactions) for p in penalties}
            penalty = min(by_penalty, key=by_penalty.__getitem__)
        self.steps_column_, self.penalty_, self.interactions_ = int(steps), float(penalty), interactions
        self.steps_name_ = str(feature_names[steps]) if feature_names is not None else f"x{steps}"
        (self.fill_, self.log_columns_, self.startup_pairs_, self.step_pairs_, self.startup_coef_,
         self.startup_intercept_, self.step_coef_, self.step_intercept_) = self._fit_parts(X, y, groups, steps, penalty,
                                                                           interactions)
        n_folds = min(self.calibration_folds or 0, np.unique(groups).size)
        scores = []
        if n_folds >= 2:
            for held_out in trainable_folds(groups, n_folds, seed, min_train=2):
                parts = self._fit_parts(X[~held_out], y[~held_out], groups[~held_out], steps, penalty, interactions)
                scores.append(np.abs(np.log(y[held_out]) - self._predict_parts(parts, X[held_out], steps)))
        self.calibration_scores_ = np.sort(np.concatenate(scores)) if scores else np.zeros(0)
        return self

    def artifact(self) -> tuple[dict, dict]:
        """(arrays, JSON settings) of the served form (:mod:`hpcpredict.daemon.runtime.artifacts`)."""
        check_is_fitted(self, "startup_coef_")
        arrays = {f"{part}_{key}": value for part, (coef, intercept, pairs) in (
            ("startup", (self.startup_coef_, self.startup_intercept_, self.startup_pairs_)),
            ("step", (self.step_coef_, self.step_intercept_, self.step_pairs_)))
            for key, value in trend_arrays(self.fill_, self.log_columns_, coef, intercept, pairs).items()}
        arrays.update(steps_column=np.asarray([self.steps_column_], dtype=np.int64),
                      calibration_scores=np.asarray(self.calibration_scores_, dtype=float))
        return arrays, {"steps_input": self.steps_name_}

    def predict_log_dist(self, X):
        check_is_fitted(self, "startup_coef_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        parts = (self.fill_, self.log_columns_, self.startup_pairs_, self.step_pairs_, self.startup_coef_,
                 self.startup_intercept_, self.step_coef_, self.step_intercept_)
        m = self._predict_parts(parts, X, self.steps_column_)
        return m, np.ones_like(m)
