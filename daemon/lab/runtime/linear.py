"""Plain linear baseline: least squares on standardised inputs, runtime in seconds.

Intervals from cross-validated absolute residuals (conformal with a constant scale).

>>> import numpy as np
>>> X = np.arange(1.0, 21.0)[:, None]; y = 2 * X[:, 0] + 1
>>> LinearRuntime().fit(X, y).predict(np.array([[30.0]])).round(6).tolist()
[61.0]
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted, validate_data

from ...runtime.conformal import conformal_multiplier, group_folds
from .learners import register_learner
from .loglinear import check_runtimes, runtime_tags


@register_learner("linear")
class LinearRuntime(RegressorMixin, BaseEstimator):
    def __init__(self, calibration_folds=5, random_state=None):
        self.calibration_folds = calibration_folds
        self.random_state = random_state

    def __sklearn_tags__(self):
        return runtime_tags(super().__sklearn_tags__())

    def _fit_one(self, X, y):
        return make_pipeline(StandardScaler(), LinearRegression()).fit(X, y)

    def fit(self, X, y, groups=None, feature_names=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        y = y.astype(float)
        check_runtimes(y)
        self.fill_ = np.nan_to_num(np.nanmedian(X, axis=0)) if X.size else np.zeros(X.shape[1])
        X = np.where(np.isnan(X), self.fill_, X)
        self.floor_ = float(np.min(y)) * 0.1
        self.pipeline_ = self._fit_one(X, y)
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        n_folds = min(self.calibration_folds, len(np.unique(groups)))
        scores = []
        if n_folds >= 2:
            seed = np.random.RandomState(self.random_state).randint(2**31 - 1)
            for held_out in group_folds(groups, n_folds, seed):
                member = self._fit_one(X[~held_out], y[~held_out])
                scores.append(np.abs(y[held_out] - np.maximum(member.predict(X[held_out]), self.floor_)))
        self.calibration_scores_ = np.sort(np.concatenate(scores)) if scores else np.zeros(0)
        return self

    def predict(self, X):
        check_is_fitted(self, "pipeline_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        X = np.where(np.isnan(X), self.fill_, X)
        return np.maximum(self.pipeline_.predict(X), self.floor_)

    def predict_interval(self, X, coverage=0.8):
        centre = self.predict(X)
        q = conformal_multiplier(self.calibration_scores_, coverage) if self.calibration_scores_.size else 0.0
        return np.maximum(centre - q, 0.0), centre + q
