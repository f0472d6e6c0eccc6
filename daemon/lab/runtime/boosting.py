"""Gradient-boosted trees runtime model (scikit-learn's ``HistGradientBoostingRegressor``).

Pipeline: missing inputs filled with training medians → log of positive inputs → a log-log
ridge trend (:func:`~hpcpredict.daemon.lab.runtime.loglinear.fit_log_trend`: power laws from few
runs; by default second order, ``interactions=True``: products of pairs of log inputs and
one-hot categories, so a categorical input may change a scaling exponent) → boosted trees on
the residual of log runtime. Measured at 50 % training (3 splits, 2026-11-24) the second-order
trend lowered MAPE from 15 to 10 % on NWChem, 12 to 9.5 % on GROMACS, 22 to 18 % on CP2K; on a
sharp synthetic switch it leaves the trees a harder residual (11 % instead of 6 %). Boosting fits what the trend misses
(thresholds, interactions, categorical switches) one small correction at a time, which on
smooth, repeated runs is less noisy than averaging deep random trees.

Interval (``interval``): ``"constant"`` (default) uses one scale s = 1, so the interval is a
constant factor around the prediction; ``"quantile"`` also boosts the 10 % and 90 % quantiles
of the residual (quantile loss) and takes half their distance as the scale of each row, so the
interval widens where runs are harder to predict. Either way the multiplier is conformal:
scores |log y − m| / s of runs held out by configuration folds (cross-fitting), so the nominal
coverage holds whatever the quantile models learned. 20 folds (at most one per configuration),
so that the fold models are close to the served one: with 5, the 80 % interval covered 84-85 %
of held-out runs on GROMACS, NWChem and LAMMPS at 50 % training; with 20, 79-83 %. Measured on the LAMMPS, CP2K and NWChem
sweeps at 50 % training (2026-11-23), quantile scales did not cover better and on the small
sweeps (15 training configurations) gave unstable widths (up to 759× the prediction), so the
default is constant.

The fitted trees are compiled to flat arrays (:class:`~hpcpredict.daemon.runtime.compiled.CompiledForest`,
a boosted model is the *sum* of its trees plus a baseline): predictions here and in the daemon
run the same numpy code, and artifacts store only arrays (no pickle).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(1, 10, size=(200, 3)); y = X[:, 0] * X[:, 1] * np.where(X[:, 2] > 5, 2.0, 1.0)
>>> model = BoostedTreesRuntime(random_state=0).fit(X, y)
>>> bool(np.mean(np.abs(model.predict(X[:50]) - y[:50]) / y[:50]) < 0.1)
True
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits

from ...runtime.artifacts import BOOSTED_PARTS, MIN_SCALE, BoostedPredictor
from ...runtime.compiled import CompiledForest, fill_and_log, with_pairs
from ...runtime.conformal import trainable_folds
from .learners import register_learner
from .loglinear import LogNormalPredictions, check_runtimes, fit_log_trend, runtime_tags
from .packing import trend_arrays

QUANTILES = (0.1, 0.9)


def compile_boosting(model: HistGradientBoostingRegressor) -> tuple[CompiledForest, float]:
    """(trees as flat arrays, baseline) of a fitted one-output model on numeric features.

    A node sends a row left when ``x <= num_threshold`` (the rows are filled: no NaN).
    """
    parts: dict[str, list[np.ndarray]] = {name: [] for name in ("left", "right", "feature", "threshold", "value")}
    roots, offset, depth = [], 0, 1
    for (tree,) in model._predictors:
        nodes = tree.nodes
        n = nodes.shape[0]
        ids = np.arange(n) + offset
        leaf = nodes["is_leaf"].astype(bool)
        parts["left"].append(np.where(leaf, ids, nodes["left"].astype(np.int64) + offset))
        parts["right"].append(np.where(leaf, ids, nodes["right"].astype(np.int64) + offset))
        parts["feature"].append(np.where(leaf, 0, nodes["feature_idx"].astype(np.int64)))
        parts["threshold"].append(np.where(leaf, np.inf, nodes["num_threshold"].astype(float)))
        parts["value"].append(np.where(leaf, nodes["value"].astype(float), 0.0))
        roots.append(offset)
        offset += n
        depth = max(depth, int(nodes["depth"].max()) + 1)
    if not roots:  # no boosting iteration: the baseline alone
        parts = {name: [np.zeros(1, dtype=np.int64 if name in ("left", "right", "feature") else float)]
                 for name in parts}
        parts["threshold"] = [np.array([np.inf])]
        roots = [0]
    arrays = {name: np.concatenate(values) for name, values in parts.items()}
    forest = CompiledForest(arrays["left"], arrays["right"], arrays["feature"], arrays["threshold"],
                            arrays["value"], np.zeros_like(arrays["value"]), np.asarray(roots, dtype=np.int64),
                            depth)
    return forest, float(np.ravel(model._baseline_prediction)[0])


def boosted_sum(boosted: tuple[CompiledForest, float], Z: np.ndarray) -> np.ndarray:
    """The sum of the trees of ``boosted`` (compile_boosting's (forest, baseline)) at each row."""
    forest, baseline = boosted
    return forest.tree_predictions(Z)[0].sum(axis=1) + baseline


@register_learner("boosted-trees", served=BoostedPredictor)
class BoostedTreesRuntime(LogNormalPredictions, RegressorMixin, BaseEstimator):
    def __init__(self, max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=5,
                 l2_regularization=1.0, trend=True, interactions=True, interval="constant", calibration_folds=20,
                 random_state=None):
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.trend = trend
        self.interactions = interactions
        self.interval = interval
        self.calibration_folds = calibration_folds
        self.random_state = random_state

    def __sklearn_tags__(self):
        return runtime_tags(super().__sklearn_tags__())

    def _boost(self, Z, r, seed, loss="squared_error", quantile=None):
        model = HistGradientBoostingRegressor(
            loss=loss, quantile=quantile, max_iter=self.max_iter, learning_rate=self.learning_rate,
            max_leaf_nodes=self.max_leaf_nodes, min_samples_leaf=self.min_samples_leaf,
            l2_regularization=self.l2_regularization, early_stopping=False, random_state=seed)
        with threadpool_limits(1, user_api="openmp"):  # small data: threads cost more than they give
            return compile_boosting(model.fit(Z, r))

    def _fit_parts(self, X, y, seed, with_scale: bool, groups=None) -> dict:
        log_y = np.log(y)
        if self.trend:
            fill, log_columns, coef, intercept, pairs = fit_log_trend(X, log_y, groups=groups,
                                                                      interactions=self.interactions)
        else:
            fill = np.nanmedian(X, axis=0) if X.shape[0] else np.zeros(X.shape[1])
            fill = np.where(np.isnan(fill), 0.0, fill)
            log_columns = np.all(np.where(np.isnan(X), fill, X) > 0, axis=0)
            coef, intercept, pairs = np.zeros(X.shape[1]), 0.0, np.zeros((0, 2), dtype=np.int64)
        Z = fill_and_log(X, fill, log_columns)
        residual = log_y - (with_pairs(Z, pairs) @ coef + intercept)
        parts = {"fill": fill, "log_columns": log_columns, "coef": coef, "intercept": intercept, "pairs": pairs,
                 "centre": self._boost(Z, residual, seed)}
        if with_scale and self.interval == "quantile":
            parts["lower"] = self._boost(Z, residual, seed, "quantile", QUANTILES[0])
            parts["upper"] = self._boost(Z, residual, seed, "quantile", QUANTILES[1])
        return parts

    @staticmethod
    def _log_dist(parts: dict, X) -> tuple[np.ndarray, np.ndarray]:
        Z = fill_and_log(X, parts["fill"], parts["log_columns"])
        trend = with_pairs(Z, parts["pairs"]) @ parts["coef"] + parts["intercept"]
        m = trend + boosted_sum(parts["centre"], Z)
        if "lower" in parts:
            s = (boosted_sum(parts["upper"], Z) - boosted_sum(parts["lower"], Z)) / 2
            return m, np.maximum(s, MIN_SCALE)
        return m, np.ones_like(m)

    def fit(self, X, y, groups=None, feature_names=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        y = y.astype(float)
        check_runtimes(y)
        if self.interval not in ("quantile", "constant"):
            raise ValueError(f"interval must be quantile or constant: {self.interval!r}")
        seed = np.random.RandomState(self.random_state).randint(2**31 - 1)
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        self.parts_ = self._fit_parts(X, y, seed, with_scale=True, groups=groups)
        self.n_iter_ = int(self.parts_["centre"][0].roots.size)
        n_folds = min(self.calibration_folds or 0, np.unique(groups).size)
        scores = []
        if n_folds >= 2:
            for held_out in trainable_folds(groups, n_folds, seed):
                member = self._fit_parts(X[~held_out], y[~held_out], seed, with_scale=True, groups=groups[~held_out])
                m, s = self._log_dist(member, X[held_out])
                scores.append(np.abs(np.log(y[held_out]) - m) / s)
        self.calibration_scores_ = np.sort(np.concatenate(scores)) if scores else np.zeros(0)
        return self

    def artifact(self) -> tuple[dict, dict]:
        """(arrays, JSON settings) of the served form (:mod:`hpcpredict.daemon.runtime.artifacts`)."""
        check_is_fitted(self, "parts_")
        parts = self.parts_
        arrays = trend_arrays(parts["fill"], parts["log_columns"], parts["coef"], parts["intercept"], parts["pairs"])
        arrays["calibration_scores"] = np.asarray(self.calibration_scores_, dtype=float)
        for name in BOOSTED_PARTS:
            if name in parts:
                forest, baseline = parts[name]
                arrays.update({f"{name}_{key}": value for key, value in forest.arrays().items()})
                arrays[f"{name}_baseline"] = np.asarray([baseline])
        return arrays, {"boosted_parts": [name for name in BOOSTED_PARTS if name in parts]}

    def predict_log_dist(self, X):
        check_is_fitted(self, "parts_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return self._log_dist(self.parts_, X)


