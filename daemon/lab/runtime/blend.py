"""A blend of runtime learners: the mean, in log space, of their predictions.

Learners with different error structures often average to below each of them. The default
members are the Gaussian process (:class:`~.gaussian_process.GaussianProcessRuntime`: a smooth
surface over a log-log trend, misses thresholds), the boosted trees
(:class:`~.boosting.BoostedTreesRuntime`: a log-log trend plus small corrections, which follow
the noise of a few configurations) and the ANN ensemble (:class:`~.ann.ANNEnsemble`: a smooth
surface of another family). A member that cannot model the runs (the Gaussian process with
fewer configurations than it needs) is replaced by the log-log trend
(:class:`~.loglinear.LogLinearRuntime`, :data:`FALLBACK`: the blend's smooth member before the
Gaussian process). The blend predicts
exp(mean of the members' log predictions), the geometric mean of their runtimes: in log space,
where the members are fitted, a plain average (scikit-learn's ``VotingRegressor`` with equal
weights does the same on a log target; it is not used because our members need each run's
configuration in ``fit`` and the served model is the members' own arrays). Equal weights:
weights fitted on the same few configurations would add the variance the average removes.
Measured on the held-out halves of the four real sweeps (3 splits, 2026-11-24, MAPE of
log-linear / boosted / ANN / blend of the first two / blend of all three): LAMMPS 9.4 / 10.5 /
9.9 / 9.8 / 9.5 %, GROMACS 8.5 / 7.9 / 8.5 / 8.0 / 7.2 %, CP2K 10.5 / 9.4 / 11.3 / 9.5 / 9.6 %,
NWChem 10.3 / 10.3 / 17.0 / 10.2 / 11.3 %: the two trend models alone err together (the boosted
trees start from the same trend); the ANN's errors differ. With the Gaussian process in the log-log
trend's place, on development splits (seeds 100-105, 50 % training, held-out MAPE of the blend
with log-linear / with the Gaussian process): LAMMPS 4.56 / 4.27 %, GROMACS 4.40 / 3.97 %, CP2K
5.64 / 5.50 %, NWChem 7.42 / 5.91 %. ``--learner auto`` serves the blend
unless cross-validation shows a single learner clearly better (:mod:`.selection`: the blend is
the hedge there, not one more rich model).

Interval: cross-conformal, like the members, on the blend's *own* residuals: over
``calibration_folds`` configuration folds, the members (without their own calibration) are
refitted without the fold, their log predictions averaged on it, and the score of each
held-out run is |log y − m|; the interval is exp(m ± q) with q the conformal quantile of those
scores (one constant factor, whatever the members' own interval methods). The fold blends
use an ANN ensemble of at most 5 nets (the served one has 10; :mod:`.selection` does the same
for cross-validation): a fold model a little worse than the served one makes the interval a
little wider, never narrower, and costs half as much.

``random_state`` is handed to every member as given, so a blend's members are exactly the
models each learner fits alone with that seed; the folds use the seed resolved in ``fit``.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(1, 10, size=(120, 2)); y = X[:, 0] ** 2 * X[:, 1] * np.exp(rng.normal(0, 0.05, 120))
>>> model = BlendRuntime(members=("log-linear", "boosted-trees"), member_params={"boosted-trees": {"max_iter": 30}},
...                      calibration_folds=5, random_state=0).fit(X, y)
>>> [name for name, _ in model.members_]
['log-linear', 'boosted-trees']
>>> logs = [np.log(member.predict(X[:3])) for _, member in model.members_]
>>> bool(np.allclose(model.predict(X[:3]), np.exp((logs[0] + logs[1]) / 2)))
True
>>> low, high = model.predict_interval(X[:3], 0.8)
>>> bool(np.all((low < model.predict(X[:3])) & (model.predict(X[:3]) < high)))
True
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ...errors import ModelArtifactError
from ...runtime.artifacts import SERVABLE, BlendPredictor
from ...runtime.conformal import trainable_folds
# The learners a blend can contain, so that each is registered under its name (make_learner).
from . import ann, boosting, gaussian_process, startup_steps, trees  # noqa: F401
from .learners import LearnerNotApplicable, make_learner, register_learner
from .loglinear import LogNormalPredictions, check_runtimes, runtime_tags
from .packing import pack

MEMBERS = ("gaussian-process", "boosted-trees", "ann")
FALLBACK = "log-linear"   # in place of a member that cannot model the runs
FOLD_ANN_MEMBERS = 5   # nets of the ANN member in the calibration folds' blends


def uncalibrated(name: str, params: dict) -> dict:
    """A member's parameters without its own interval calibration (the blend calibrates itself).

    Calibration does not change a member's point prediction; the ANN ensemble has no switch
    (its calibration comes free from its members' held-out runs).
    """
    if name == "ann":
        return dict(params)
    if name == "boosted-trees":
        return dict(params, calibration_folds=0, interval="constant")
    return dict(params, calibration_folds=0)


def in_folds(name: str, params: dict) -> dict:
    """A learner's parameters for a fit inside folds: the ANN ensemble with at most
    FOLD_ANN_MEMBERS nets (its default is 10), every other learner as given."""
    if name != "ann":
        return params
    return dict(params, n_members=min(FOLD_ANN_MEMBERS, params.get("n_members", 10)))


def with_fallback(predicted: dict, members) -> list | None:
    """The members' entries of ``predicted`` (name → value, None where the learner could not model
    the runs), :data:`FALLBACK`'s in place of a member's None; None when that leaves none."""
    if FALLBACK in members and any(predicted.get(name) is None for name in members):
        return None   # the fallback would stand in for a member beside itself (as fitting refuses)
    chosen = [predicted.get(name) if predicted.get(name) is not None else predicted.get(FALLBACK) for name in members]
    return None if any(value is None for value in chosen) else chosen


@register_learner("blend", served=BlendPredictor)
class BlendRuntime(LogNormalPredictions, RegressorMixin, BaseEstimator):
    def __init__(self, members=MEMBERS, member_params=None, calibration_folds=20, random_state=None):
        self.members = members
        self.member_params = member_params
        self.calibration_folds = calibration_folds
        self.random_state = random_state

    def __sklearn_tags__(self):
        return runtime_tags(super().__sklearn_tags__())

    def _member_specs(self) -> list[tuple[str, dict]]:
        names = list(self.members)
        params = dict(self.member_params or {})
        if len(names) < 2 or len(set(names)) != len(names):
            raise ValueError(f"a blend needs at least 2 distinct members: {names!r}")
        # Learners a blend may contain: those that can be served from arrays (not a blend: no nesting).
        member_learners = [name for name in SERVABLE if name != "blend"]
        unknown = sorted(set(names) - set(member_learners)) + sorted(set(params) - set(names))
        if unknown:
            raise ValueError(f"unknown blend members {unknown!r} (choose from {', '.join(member_learners)})")
        return [(name, uncalibrated(name, dict(params.get(name) or {}, random_state=self.random_state)))
                for name in names]

    @staticmethod
    def _fit_members(specs, X, y, groups, feature_names):
        members = []
        for name, params in specs:
            try:
                learner = make_learner(name, **params).fit(X, y, groups=groups, feature_names=feature_names)
            except LearnerNotApplicable:
                if FALLBACK in (spec[0] for spec in specs):
                    raise
                name, params = FALLBACK, uncalibrated(FALLBACK, {"random_state": params.get("random_state")})
                learner = make_learner(name, **params).fit(X, y, groups=groups, feature_names=feature_names)
            members.append((name, learner))
        return members

    @staticmethod
    def _log_mean(members, X) -> np.ndarray:
        return np.mean([member.predict_log_dist(X)[0] for _, member in members], axis=0)

    def fit(self, X, y, groups=None, feature_names=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        y = y.astype(float)
        check_runtimes(y)
        specs = self._member_specs()
        seed = np.random.RandomState(self.random_state).randint(2**31 - 1)
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        self.members_ = self._fit_members(specs, X, y, groups, feature_names)
        # The columns some member needs (a member without the attribute needs every column).
        self.kept_inputs_ = sorted(set().union(*(getattr(member, "kept_inputs_", range(X.shape[1]))
                                                 for _, member in self.members_)))
        n_folds = min(self.calibration_folds or 0, np.unique(groups).size)
        scores = []
        if n_folds >= 2:
            fold_specs = [(name, in_folds(name, params)) for name, params in specs]
            for held_out in trainable_folds(groups, n_folds, seed):
                fold_members = self._fit_members(fold_specs, X[~held_out], y[~held_out], groups[~held_out], feature_names)
                scores.append(np.abs(np.log(y[held_out]) - self._log_mean(fold_members, X[held_out])))
        self.calibration_scores_ = np.sort(np.concatenate(scores)) if scores else np.zeros(0)
        return self

    def artifact(self) -> tuple[dict, dict]:
        """(arrays, JSON settings) of the served form (:mod:`hpcpredict.daemon.runtime.artifacts`)."""
        check_is_fitted(self, "members_")
        arrays = {"calibration_scores": np.asarray(self.calibration_scores_, dtype=float)}
        members = []
        for i, (_, member) in enumerate(self.members_):
            learner, member_arrays, settings = pack(member)
            if learner == "blend":
                raise ModelArtifactError("a blend cannot contain a blend")
            arrays.update({f"member{i}_{key}": value for key, value in member_arrays.items()})
            members.append({"learner": learner, "settings": settings})
        return arrays, {"blend_members": members}

    def predict_log_dist(self, X):
        check_is_fitted(self, "members_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        m = self._log_mean(self.members_, X)
        return m, np.ones_like(m)

