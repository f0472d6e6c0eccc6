"""ANN ensembles of seed 003 (Singh, İpek, McKee et al.).

Sigmoid feed-forward nets (scikit-learn ``MLPRegressor``) fitted to log runtime, so squared
error in training is relative error in seconds (the seed's stratification by 1/y has the same
aim; ``target="weighted"`` instead replicates each run ∝ 1/y). Positive numeric inputs are
log-scaled, then standardised. Ensembles:

* ``method="kfold"`` — k folds of configurations, as in the seed: member i stops early on
  fold i (the epoch with the lowest fold-i error is kept), is tested on fold i+1 and trains
  on the other k − 2 folds;
* ``method="bagging"`` — member i trains on a bootstrap sample of configurations, stops
  early on half of the out-of-bag configurations and is tested on the other half.

Interval calibration uses only each member's *test* runs (never seen in its training or
early stopping), so the conformal guarantee holds.

The prediction is the mean of the members; their spread is the uncertainty (used by active
learning as CoV, and — calibrated on each member's held-out runs — for intervals).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(1, 10, size=(120, 2)); y = X[:, 0] ** 2 * X[:, 1]
>>> model = ANNEnsemble(n_members=4, max_epochs=300, random_state=0).fit(X, y)
>>> bool(np.mean(np.abs(model.predict(X) - y) / y) < 0.15)
True
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor
from sklearn.utils.validation import check_is_fitted, validate_data

from ...runtime.artifacts import EnsemblePredictor
from ...runtime.compiled import fill_and_log
from ...runtime.compiled_ann import CompiledEnsemble
from ...runtime.conformal import group_folds
from .learners import register_learner
from .loglinear import LogNormalPredictions, check_runtimes, runtime_tags


@register_learner("ann", served=EnsemblePredictor)
class ANNEnsemble(LogNormalPredictions, RegressorMixin, BaseEstimator):
    def __init__(self, n_members=10, method="kfold", hidden_layer_sizes=(16,), activation="logistic",
                 alpha=1e-4, learning_rate_init=0.01, max_epochs=400, patience=40, target="log",
                 log_inputs=True, random_state=None):
        self.n_members = n_members
        self.method = method
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.alpha = alpha
        self.learning_rate_init = learning_rate_init
        self.max_epochs = max_epochs
        self.patience = patience
        self.target = target
        self.log_inputs = log_inputs
        self.random_state = random_state

    def __sklearn_tags__(self):
        return runtime_tags(super().__sklearn_tags__())

    # -- preprocessing -------------------------------------------------------------------
    def standardised_inputs(self, X):
        return (fill_and_log(X, self.fill_, self.log_columns_) - self.mean_) / self.scale_

    def _target(self, y):
        return (np.log(y) - self.y_mean_) / self.y_scale_ if self.target == "log" else y / self.y_scale_

    def _untarget(self, t):
        return np.exp(t * self.y_scale_ + self.y_mean_) if self.target == "log" else t * self.y_scale_

    # -- training ------------------------------------------------------------------------
    def _train_member(self, Z, t, weights, train, stop, seed):
        net = MLPRegressor(hidden_layer_sizes=self.hidden_layer_sizes, activation=self.activation,
                           alpha=self.alpha, learning_rate_init=self.learning_rate_init,
                           solver="adam", batch_size=min(32, int(train.sum())), random_state=seed)
        Z_train, t_train = Z[train], t[train]
        if weights is not None:  # stratification: replicate runs ∝ 1/y
            copies = np.maximum(1, np.round(weights[train] / weights[train].min())).astype(int)
            copies = np.minimum(copies, 20)
            Z_train, t_train = np.repeat(Z_train, copies, axis=0), np.repeat(t_train, copies)
        best: tuple[float, tuple[list[np.ndarray], list[np.ndarray]] | None] = (np.inf, None)
        since_best = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for _ in range(self.max_epochs):
                net.partial_fit(Z_train, t_train)
                if not stop.any():
                    continue
                error = float(np.mean((net.predict(Z[stop]) - t[stop]) ** 2))
                if error < best[0] - 1e-9:
                    best = (error, ([c.copy() for c in net.coefs_], [b.copy() for b in net.intercepts_]))
                    since_best = 0
                else:
                    since_best += 1
                    if since_best >= self.patience:
                        break
        if best[1] is not None:
            net.coefs_, net.intercepts_ = best[1]
        return net

    def fit(self, X, y, groups=None, feature_names=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        y = y.astype(float)
        check_runtimes(y)
        if self.method not in ("kfold", "bagging") or self.target not in ("log", "weighted"):
            raise ValueError("method must be kfold|bagging and target log|weighted")
        rng = np.random.RandomState(self.random_state)
        fill = np.nanmedian(X, axis=0) if X.size else np.zeros(X.shape[1])
        self.fill_ = np.where(np.isnan(fill), 0.0, fill)
        Xf = np.where(np.isnan(X), self.fill_, X)
        self.log_columns_ = self.log_inputs & np.all(Xf > 0, axis=0) & (Xf.max(axis=0) > 2 * Xf.min(axis=0))
        Xl = np.where(self.log_columns_, np.log(np.maximum(Xf, 1e-300)), Xf)
        self.mean_ = Xl.mean(axis=0)
        scale = Xl.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        if self.target == "log":
            self.y_mean_, self.y_scale_ = float(np.log(y).mean()), float(np.log(y).std() or 1.0)
        else:
            self.y_mean_, self.y_scale_ = 0.0, float(y.mean())
        Z, t = self.standardised_inputs(X), self._target(y)
        weights = 1.0 / y if self.target == "weighted" else None
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        unique = np.unique(groups)
        self.members_, held_out = [], []
        splits = []
        if self.method == "kfold" and unique.size >= 3:
            n_folds = max(3, min(self.n_members, unique.size))
            folds = group_folds(groups, n_folds, rng.randint(2**31 - 1))
            for i in range(n_folds):
                stop, test = folds[i], folds[(i + 1) % n_folds]
                splits.append((~(stop | test), stop, test))
        elif self.method == "bagging" or unique.size < 3:
            for _ in range(self.n_members):
                bag = rng.choice(unique, size=unique.size, replace=True)
                out = rng.permutation(np.setdiff1d(unique, bag))
                in_bag = np.isin(groups, bag)
                splits.append((in_bag, np.isin(groups, out[::2]), np.isin(groups, out[1::2])))
        for train, stop, test in splits:
            self.members_.append(self._train_member(Z, t, weights, train, stop, rng.randint(2**31 - 1)))
            held_out.append(test)
        self.calibration_scores_ = self._calibration_scores(Z, y, held_out)
        return self

    def _calibration_scores(self, Z, y, held_out):
        """|log y − m_member| / s_ensemble over each member's held-out runs."""
        member_log = np.log(self._member_predictions(Z))
        s = np.maximum(member_log.std(axis=0), 1e-6)
        scores = []
        for k, stop in enumerate(held_out):
            scores.append(np.abs(np.log(y[stop]) - member_log[k, stop]) / s[stop])
        return np.sort(np.concatenate(scores)) if scores else np.zeros(0)

    # -- prediction ----------------------------------------------------------------------
    def _member_predictions(self, Z):
        floor = 1e-9
        return np.stack([np.maximum(self._untarget(net.predict(Z)), floor) for net in self.members_])

    def predict_members(self, X) -> np.ndarray:
        """Runtime predicted by every member: shape (n_members, n_rows)."""
        check_is_fitted(self, "members_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return self._member_predictions(self.standardised_inputs(X))

    def artifact(self) -> tuple[dict, dict]:
        """(arrays, JSON settings) of the served form (:mod:`hpcpredict.daemon.runtime.artifacts`)."""
        check_is_fitted(self, "members_")
        compiled = CompiledEnsemble.from_sklearn(self)
        arrays = dict(compiled.arrays(), calibration_scores=np.asarray(self.calibration_scores_, dtype=float))
        return arrays, {"ann": compiled.settings()}

    def predict_log_dist(self, X):
        logs = np.log(self.predict_members(X))
        return logs.mean(axis=0), np.maximum(logs.std(axis=0), 1e-6)

    def coefficient_of_variation(self, X) -> np.ndarray:
        members = self.predict_members(X)
        return members.std(axis=0) / members.mean(axis=0)

