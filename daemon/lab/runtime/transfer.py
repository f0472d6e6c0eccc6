"""Transfer to a new platform (seed 000): h(f_source(x), x) fitted on few target runs.

``source`` is any fitted runtime learner of the *source* platform on the same feature
matrix. The target model sees the source's log prediction as an extra input. With
``base="ridge"`` (default, robust with a handful of runs) h is log f_source(x) plus a ridge
correction fitted on [log f_source(x), standardised x], its penalty chosen by leave-one-out
(so with too few runs h shrinks to "the source model, rescaled"); with
``base="extra-trees"`` h is the seed's extra-trees on [log f_source(x), x]. Intervals:
conformal on cross-validated log residuals.

>>> import numpy as np
>>> from hpcpredict.daemon.lab.runtime.trees import ExtraTreesRuntime
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(1, 10, size=(300, 2)); source_y = X[:, 0] * X[:, 1]
>>> source = ExtraTreesRuntime(n_estimators=50, calibration_folds=0, random_state=0).fit(X, source_y)
>>> few = rng.choice(300, 15, replace=False)
>>> target = TransferRuntime(source).fit(X[few], 3 * source_y[few] ** 1.1)
>>> rest = np.setdiff1d(np.arange(300), few)
>>> bool(np.mean(np.abs(target.predict(X[rest]) - 3 * source_y[rest] ** 1.1) / (3 * source_y[rest] ** 1.1)) < 0.15)
True
"""
from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import RidgeCV
from sklearn.utils.validation import check_is_fitted

from ...runtime.conformal import conformal_multiplier, group_folds
from .trees import ExtraTreesRuntime


class TransferRuntime(RegressorMixin, BaseEstimator):
    def __init__(self, source=None, base="ridge", alpha=1.0, calibration_folds=5, random_state=None):
        self.source = source
        self.base = base
        self.alpha = alpha
        self.calibration_folds = calibration_folds
        self.random_state = random_state

    def _augment(self, X):
        X = np.asarray(X, dtype=float)
        return np.column_stack([np.log(self.source.predict(X)), X])

    def _fit_base(self, Z, y, groups):
        if self.base == "ridge":
            fill = np.nan_to_num(np.nanmedian(Z, axis=0))
            Zf = np.where(np.isnan(Z), fill, Z)
            mean, scale = Zf.mean(axis=0), Zf.std(axis=0)
            scale = np.where(scale > 0, scale, 1.0)
            # The correction log y − log f_s is shrunk towards a constant: the prior is
            # "target = source × a factor", learnt from the first few runs.
            alphas = np.logspace(-3, 3, 13) * max(self.alpha, 1e-9)
            ridge = RidgeCV(alphas=alphas).fit((Zf - mean) / scale, np.log(y) - Zf[:, 0])
            return ("ridge", fill, mean, scale, ridge)
        if self.base == "extra-trees":
            trees = ExtraTreesRuntime(n_estimators=100, calibration_folds=0, importance_threshold=None,
                                      random_state=self.random_state)
            return ("trees", trees.fit(Z, y, groups=groups))
        raise ValueError(f"base must be ridge or extra-trees: {self.base!r}")

    @staticmethod
    def _predict_base(fitted, Z):
        if fitted[0] == "ridge":
            _, fill, mean, scale, ridge = fitted
            Zf = np.where(np.isnan(Z), fill, Z)
            return Zf[:, 0] + ridge.predict((Zf - mean) / scale)
        return np.log(fitted[1].predict(Z))

    def fit(self, X, y, groups=None, feature_names=None):
        if self.source is None:
            raise ValueError("TransferRuntime needs a fitted source model")
        y = np.asarray(y, dtype=float)
        Z = self._augment(X)
        self.fitted_ = self._fit_base(Z, y, groups)
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        n_folds = min(self.calibration_folds, np.unique(groups).size)
        scores = []
        if n_folds >= 2:
            for held_out in group_folds(groups, n_folds, self.random_state):
                member = self._fit_base(Z[~held_out], y[~held_out], groups[~held_out])
                scores.append(np.abs(np.log(y[held_out]) - self._predict_base(member, Z[held_out])))
        self.calibration_scores_ = np.sort(np.concatenate(scores)) if scores else np.zeros(0)
        return self

    def predict(self, X):
        check_is_fitted(self, "fitted_")
        return np.exp(self._predict_base(self.fitted_, self._augment(X)))

    def predict_interval(self, X, coverage=0.8):
        centre = np.log(self.predict(X))
        q = conformal_multiplier(self.calibration_scores_, coverage) if self.calibration_scores_.size else 0.0
        return np.exp(centre - q), np.exp(centre + q)
