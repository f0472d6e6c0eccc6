"""Extremely randomised trees runtime model of seed 000 (Sun et al.).

Pipeline: missing inputs filled with training medians → optional d-order polynomial
expansion → standardisation → reduction by importance (top features up to 95 % cumulative
MSE-decrease importance, then refit) → extra-trees on log runtime. Interval: the seed's
per-tree mean/variance m ± s, calibrated by cross-conformal scores over configuration folds so
that nominal coverage is met.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(1, 10, size=(200, 3)); y = X[:, 0] * X[:, 1] + 1
>>> model = ExtraTreesRuntime(n_estimators=50, random_state=0).fit(X, y, feature_names=["a", "b", "c"])
>>> model.kept_feature_names_
['a', 'b']
>>> bool(np.mean(np.abs(model.predict(X[:20]) - y[:20]) / y[:20]) < 0.1)
True
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.preprocessing import PolynomialFeatures
from sklearn.utils.validation import check_is_fitted

from .compiled import CompiledForest
from .conformal import conformal_multiplier, group_folds
from .reduction import keep_by_importance


def transform_features(X, fill, powers, mean, scale, kept) -> np.ndarray:
    """Fill → polynomial terms (``powers``: terms × inputs) → standardise → kept columns."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    X = np.where(np.isnan(X), fill, X)
    terms = np.prod(X[:, None, :] ** powers[None, :, :], axis=2)
    return ((terms - mean) / scale)[:, kept]


class ExtraTreesRuntime(RegressorMixin, BaseEstimator):
    def __init__(self, n_estimators=200, degree=1, standardize=True, importance_threshold=0.95,
                 min_samples_leaf=1, max_features=1.0, calibration_folds=5,
                 single_leaf_variance=0.01, random_state=None):
        self.n_estimators = n_estimators
        self.degree = degree
        self.standardize = standardize
        self.importance_threshold = importance_threshold
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.calibration_folds = calibration_folds
        self.single_leaf_variance = single_leaf_variance
        self.random_state = random_state

    def _forest(self, seed):
        return ExtraTreesRegressor(n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
                                   max_features=self.max_features, random_state=seed, n_jobs=1)

    def fit(self, X, y, groups=None, feature_names=None):
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[0] < 2:
            raise ValueError("X must be (n_runs, n_features) with n_runs >= 2 matching y")
        if np.any(~np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("runtimes must be positive and finite")
        seed = np.random.RandomState(self.random_state).randint(2**31 - 1)
        self.n_features_in_ = X.shape[1]
        names = list(feature_names) if feature_names is not None else [f"x{i}" for i in range(X.shape[1])]
        fill = np.nanmedian(np.where(np.isnan(X), np.nan, X), axis=0) if X.size else np.zeros(0)
        self.fill_ = np.where(np.isnan(fill), 0.0, fill)
        poly = PolynomialFeatures(degree=self.degree, include_bias=False).fit(np.zeros((1, X.shape[1])))
        self.powers_ = poly.powers_.astype(float)
        self.term_names_ = list(poly.get_feature_names_out(names))
        all_terms = np.arange(self.powers_.shape[0])
        terms = transform_features(X, self.fill_, self.powers_, 0.0, 1.0, all_terms)
        if self.standardize:
            self.mean_ = terms.mean(axis=0)
            scale = terms.std(axis=0)
            self.scale_ = np.where(scale > 0, scale, 1.0)
        else:
            self.mean_, self.scale_ = np.zeros(terms.shape[1]), np.ones(terms.shape[1])
        Z = (terms - self.mean_) / self.scale_
        target = np.log(y)
        forest = self._forest(seed).fit(Z, target)
        self.importances_ = forest.feature_importances_
        if self.importance_threshold is not None and self.importance_threshold < 1:
            self.kept_ = np.asarray(keep_by_importance(self.importances_, threshold=self.importance_threshold))
            forest = self._forest(seed).fit(Z[:, self.kept_], target)
        else:
            self.kept_ = all_terms
        self.forest_ = forest
        self.kept_feature_names_ = [self.term_names_[i] for i in self.kept_]
        self.kept_inputs_ = sorted(set(np.nonzero(self.powers_[self.kept_].sum(axis=0))[0].tolist()))
        self.compiled_ = CompiledForest.from_sklearn(forest, single_leaf_variance=self.single_leaf_variance)
        self.calibration_scores_ = self._calibrate(X, y, groups, seed)
        return self

    def _calibrate(self, X, y, groups, seed) -> np.ndarray:
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        n_folds = min(self.calibration_folds or 0, len(np.unique(groups)))
        if n_folds < 2:
            return np.zeros(0)
        scores = np.empty(len(y))
        params = dict(self.get_params(), calibration_folds=0, random_state=seed)
        for held_out in group_folds(groups, n_folds, seed):
            member = ExtraTreesRuntime(**params).fit(X[~held_out], y[~held_out])
            m, s = member.predict_log_dist(X[held_out])
            scores[held_out] = np.abs(np.log(y[held_out]) - m) / s
        return np.sort(scores)

    def transform(self, X) -> np.ndarray:
        check_is_fitted(self, "compiled_")
        return transform_features(X, self.fill_, self.powers_, self.mean_, self.scale_, self.kept_)

    def predict_log_dist(self, X):
        """Centre m and scale s of log runtime per row (seed 000's per-tree mixture)."""
        return self.compiled_.mean_std(self.transform(X))

    def predict(self, X):
        return np.exp(self.predict_log_dist(X)[0])

    def predict_interval(self, X, coverage=0.8):
        m, s = self.predict_log_dist(X)
        q = conformal_multiplier(self.calibration_scores_, coverage)
        return np.exp(m - q * s), np.exp(m + q * s)
