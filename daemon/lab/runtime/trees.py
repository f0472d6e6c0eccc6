"""Extremely randomised trees runtime model of seed 000 (Sun et al.).

Pipeline: missing inputs filled with training medians → optional d-order polynomial
expansion → standardisation → reduction by importance (top features up to 95 % cumulative
MSE-decrease importance, then refit) → extra-trees on log runtime. By default
(``trend="loglinear"``, our addition to the seed) the trees model the residual of a log-log
ridge trend, which captures power laws (n³, steps × atoms) from few runs; ``trend="none"`` is
the seed's plain model. Interval: the seed's
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
from sklearn.linear_model import RidgeCV
from sklearn.preprocessing import PolynomialFeatures
from sklearn.utils.validation import check_is_fitted, validate_data

from ...runtime.artifacts import ForestPredictor
from ...runtime.compiled import CompiledForest, log_linear_trend, transform_features
from ...runtime.conformal import group_folds, trainable_folds
from .learners import register_learner
from .loglinear import LogNormalPredictions, check_runtimes, runtime_tags
from .reduction import keep_by_importance


@register_learner("extra-trees", served=ForestPredictor)
class ExtraTreesRuntime(LogNormalPredictions, RegressorMixin, BaseEstimator):
    def __init__(self, n_estimators=200, degree=1, standardize=True, importance_threshold=0.95,
                 min_samples_leaf=1, max_features=1.0, calibration_folds=5,
                 single_leaf_variance=0.01, trend="loglinear", trend_alpha=1e-3, calibration="cv",
                 random_state=None):
        self.n_estimators = n_estimators
        self.degree = degree
        self.standardize = standardize
        self.importance_threshold = importance_threshold
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.calibration_folds = calibration_folds
        self.single_leaf_variance = single_leaf_variance
        self.trend = trend
        self.trend_alpha = trend_alpha
        self.calibration = calibration
        self.random_state = random_state

    def __sklearn_tags__(self):
        return runtime_tags(super().__sklearn_tags__())

    def _forest(self, seed):
        return ExtraTreesRegressor(n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
                                   max_features=self.max_features, random_state=seed, n_jobs=1)

    def fit(self, X, y, groups=None, feature_names=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        y = y.astype(float)
        check_runtimes(y)
        if self.calibration not in ("cv", "split"):
            raise ValueError(f"calibration must be cv or split: {self.calibration!r}")
        seed = np.random.RandomState(self.random_state).randint(2**31 - 1)
        if self.calibration == "split" and self.calibration_folds:
            return self._fit_split(X, y, groups, feature_names, seed)
        self._fit_forest(X, y, feature_names, seed)
        self.calibration_scores_ = self._calibrate(X, y, groups, seed)
        return self

    def _fit_forest(self, X, y, feature_names, seed) -> None:
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
        log_y = np.log(y)
        if self.importance_threshold is not None and self.importance_threshold < 1:
            # Importance is measured for log runtime itself (the seed's reduction), before any trend.
            self.importances_ = self._forest(seed).fit(Z, log_y).feature_importances_
            self.kept_ = np.asarray(keep_by_importance(self.importances_, threshold=self.importance_threshold))
        else:
            self.importances_ = None
            self.kept_ = all_terms
        self.kept_feature_names_ = [self.term_names_[i] for i in self.kept_]
        self.kept_inputs_ = sorted(set(np.nonzero(self.powers_[self.kept_].sum(axis=0))[0].tolist()))
        target = log_y - self._fit_trend(X, log_y, self.kept_inputs_)
        forest = self._forest(seed).fit(Z[:, self.kept_], target)
        self.forest_ = forest
        self.compiled_ = CompiledForest.from_sklearn(forest, single_leaf_variance=self.single_leaf_variance)

    def _fit_trend(self, X, log_y, columns) -> np.ndarray:
        """``trend="loglinear"``: trees model the residual of a ridge fit of log y on log x.

        Runtime is often a product of powers of its inputs (n³, steps × atoms); axis-aligned
        trees need many samples for that, a log-log trend captures it with few.
        """
        n = X.shape[1]
        self.log_columns_ = np.zeros(n, dtype=bool)
        self.trend_coef_, self.trend_intercept_ = np.zeros(n), 0.0
        if self.trend == "none":
            return np.zeros(len(log_y))
        if self.trend != "loglinear":
            raise ValueError(f"trend must be none or loglinear: {self.trend!r}")
        Xf = np.where(np.isnan(X), self.fill_, X)
        self.log_columns_ = np.all(Xf > 0, axis=0)
        L = np.where(self.log_columns_, np.log(np.maximum(Xf, 1e-300)), Xf)
        unused = np.ones(n, dtype=bool)
        unused[list(columns)] = False
        L[:, unused] = 0.0  # only the inputs kept by importance enter the trend
        mean, std = L.mean(axis=0), L.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        # Penalty by leave-one-out among trend_alpha × 10^k: strong when runs are few.
        alphas = self.trend_alpha * len(log_y) * np.logspace(0, 5, 11)
        ridge = RidgeCV(alphas=alphas).fit((L - mean) / std, log_y)
        self.trend_coef_ = np.where(unused, 0.0, ridge.coef_ / std)
        self.trend_intercept_ = float(ridge.intercept_ - np.sum(ridge.coef_ * mean / std))
        return self.trend_of(X)

    def trend_of(self, X) -> np.ndarray:
        return log_linear_trend(X, self.fill_, self.log_columns_, self.trend_coef_, self.trend_intercept_)

    def _fit_split(self, X, y, groups, feature_names, seed):
        """Split conformal: fit on all configurations but one fold, score that fold."""
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        held_out = group_folds(groups, max(2, self.calibration_folds), seed)[0]
        if held_out.all() or not held_out.any():
            raise ValueError("split calibration needs at least 2 configurations")
        self._fit_forest(X[~held_out], y[~held_out], feature_names, seed)
        m, s = self._log_dist(X[held_out])
        self.calibration_scores_ = np.sort(np.abs(np.log(y[held_out]) - m) / s)
        return self

    def _calibrate(self, X, y, groups, seed) -> np.ndarray:
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        n_folds = min(self.calibration_folds or 0, len(np.unique(groups)))
        if n_folds < 2:
            return np.zeros(0)
        scores = []
        params = dict(self.get_params(), calibration_folds=0, random_state=seed)
        for held_out in trainable_folds(groups, n_folds, seed):
            member = ExtraTreesRuntime(**params).fit(X[~held_out], y[~held_out])
            m, s = member.predict_log_dist(X[held_out])
            scores.append(np.abs(np.log(y[held_out]) - m) / s)
        return np.sort(np.concatenate(scores)) if scores else np.zeros(0)

    def feature_terms(self, X) -> np.ndarray:
        """The standardised polynomial terms the forest splits on (the kept ones)."""
        check_is_fitted(self, "compiled_")
        return transform_features(X, self.fill_, self.powers_, self.mean_, self.scale_, self.kept_)

    def _log_dist(self, X):
        m, s = self.compiled_.mean_std(self.feature_terms(X))
        return m + self.trend_of(X), s

    def artifact(self) -> tuple[dict, dict]:
        """(arrays, JSON settings) of the served form (:mod:`hpcpredict.daemon.runtime.artifacts`)."""
        check_is_fitted(self, "compiled_")
        arrays = dict(self.compiled_.arrays(), fill=self.fill_, powers=self.powers_, mean=self.mean_,
                      scale=self.scale_, kept=np.asarray(self.kept_, dtype=np.int64),
                      calibration_scores=self.calibration_scores_, log_columns=self.log_columns_.astype(np.int8),
                      trend_coef=self.trend_coef_, trend_intercept=np.asarray([self.trend_intercept_]))
        return arrays, {"n_trees": len(self.compiled_.roots)}

    def predict_log_dist(self, X):
        """Centre m and scale s of log runtime per row (seed 000's per-tree mixture)."""
        check_is_fitted(self, "compiled_")
        return self._log_dist(validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64))

