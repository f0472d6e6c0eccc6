"""Gaussian-process runtime model: a smooth surface of log runtime over the (log) inputs.

A code whose inputs are continuous (box edges, cut-offs, temperatures) has a runtime that is a
smooth but not a simple function of them: LAMMPS's pair work grows as (cutoff + skin)³, its
neighbour-list builds as steps · √temp / skin, and they add. A product of powers
(:mod:`.loglinear`) cannot bend to the sum, trees are piecewise constant between the few
configurations a site has, and each input's effect is learned from a few dozen runs. A Gaussian
process interpolates between configurations as smoothly as the runs allow, one length scale per
input, above a linear trend in the log inputs
(scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor`, kernel
c · Matérn(ν = 5/2) + linear + white noise, hyperparameters by marginal likelihood).

Measured at 50 % training (``benchmarks run runtime``, splits 0-2, commit 745b8fe): LAMMPS
3.8 % MAPE (other learners 4.5-6.5 %), NWChem 5.2 % (6.4-16.4 %); it loses on GROMACS (4.1 %
against start-up + steps 2.9 %) and CP2K (5.7 % against boosted trees 4.8 %), whose costs jump
where a code picks a grid or an iteration count: the learner choice weighs it against the others
(it comes first there where it can be fitted: :mod:`.selection`).

Fitted on each configuration's mean log runtime (the repetitions' scatter is in the white
noise of their means). Below :data:`MIN_CONFIGURATIONS` configurations one length scale per
input is more than the runs can tell (at 10 % training, 10-21 configurations, on development
splits: 11-56 % MAPE where the best learner had 7-27 %), and the fit is O(n³) in configurations:
beyond :data:`MAX_CONFIGURATIONS` the tree learners have the runs they need. Outside those
bounds it is not attempted (:class:`~.learners.LearnerNotApplicable`: the learner choice skips it,
a blend takes the log-log model in its place).

Interval: cross-conformal over configuration folds on |log y − m| (a constant factor, as
:class:`~.loglinear.LogLinearRuntime`). The fold models keep the served kernel's
hyperparameters (refitting them per fold would multiply the fit's cost by the folds).

The served prediction is one row of the kernel against the training configurations and a dot
product (:func:`kernel_row`), the same function here and in the served artifact: 41 µs median
per estimate through ``ApplicationModels.estimate`` on LAMMPS's 180 configurations (log-linear
25 µs, boosted trees 81 µs, extra-trees 143 µs; artifact 13 kB).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(1, 4, (40, 2))
>>> model = GaussianProcessRuntime(random_state=0).fit(X, 0.5 + X[:, 0] ** 2 * X[:, 1])
>>> round(float(model.predict(np.array([[2.0, 3.0]]))[0]), 1)     # 0.5 + 4 · 3
12.5
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, DotProduct, Matern, WhiteKernel
from sklearn.utils.validation import check_is_fitted, validate_data

from ...runtime.artifacts import GaussianProcessPredictor
from ...runtime.compiled import fill_and_log, kernel_row
from ...runtime.conformal import trainable_folds
from .learners import LearnerNotApplicable, register_learner
from .loglinear import LogNormalPredictions, check_runtimes, runtime_tags

MIN_CONFIGURATIONS = 24
MAX_CONFIGURATIONS = 1_000
# In standard deviations of each (log) input. Below 0.3 two configurations hardly covary: on
# LAMMPS one split's fit ended at a length scale of 0.01 for temp, 5.0 % MAPE, 4.1 % with 0.3.
LENGTH_SCALE_BOUNDS = (0.3, 1e3)
NOISE_BOUNDS = (1e-6, 1e-1)         # share of the configurations' log-runtime variance
# Starts of the marginal-likelihood search besides the kernel's own (scikit-learn draws them in the
# bounds). Its surface has poor local optima, most noise and little signal: with one restart, LAMMPS's
# split 1 at 50 % training ended at a log marginal likelihood of 19.8 where another start reaches
# 64.5 (7.1 % MAPE against 3.8 %). On 20 development splits (seeds 100-119, 50 % training) 1 → 3
# restarts: LAMMPS 3.99 → 3.83 %, NWChem 5.62 → 5.42, GROMACS 3.92 → 3.86, CP2K 5.87 → 5.93; 5
# restarts changed only GROMACS (3.74) for twice the fits. Each start costs a fit: about 1.3 s at
# 200 configurations, 3-5 s at 500 (one core).
RESTARTS = 3
# Tried on development splits (seeds 100-109, 50 % training, 2026-11-26) and not adopted:
# * an additive kernel (one Matérn per input beside the joint one): LAMMPS 3.85 → 4.03 % (4 splits),
#   NWChem 5.50 → 5.58, CP2K 5.79 → 5.38 (6 splits; boosted trees, served there, ~4.8);
# * a start-up floor under the log, log(runtime − c) with c a share of the fastest training run
#   (of the same process count): at 0.8 NWChem 5.72 → 5.14 % but GROMACS 3.68 → 5.59 (8 splits), LAMMPS 3.77 →
#   3.87; the share chosen by marginal likelihood (with the transform's Jacobian) took 0.8-0.9 on
#   every code, LAMMPS included (3.95 %). Choosing it by cross-validation would triple the fits.


@register_learner("gaussian-process", served=GaussianProcessPredictor)
class GaussianProcessRuntime(LogNormalPredictions, RegressorMixin, BaseEstimator):
    """c · Matérn 5/2 (one length scale per input) + linear + noise on log runtime."""

    def __init__(self, restarts=RESTARTS, calibration_folds=20, min_configurations=MIN_CONFIGURATIONS,
                 max_configurations=MAX_CONFIGURATIONS, random_state=None):
        self.restarts = restarts
        self.calibration_folds = calibration_folds
        self.min_configurations = min_configurations
        self.max_configurations = max_configurations
        self.random_state = random_state

    def __sklearn_tags__(self):
        return runtime_tags(super().__sklearn_tags__())

    def _regressor(self, n_inputs: int, seed: int, kernel=None) -> GaussianProcessRegressor:
        if kernel is None:
            kernel = (ConstantKernel(1.0) * Matern(np.ones(n_inputs), LENGTH_SCALE_BOUNDS, nu=2.5)
                      + DotProduct(1.0) + WhiteKernel(1e-2, NOISE_BOUNDS))
            return GaussianProcessRegressor(kernel, n_restarts_optimizer=int(self.restarts), random_state=seed)
        return GaussianProcessRegressor(kernel, optimizer=None)

    def _fit_means(self, Z: np.ndarray, log_y: np.ndarray, groups: np.ndarray, seed: int, kernel=None):
        """(regressor, training configurations, their mean log runtime's centre and scale)."""
        _, first, index = np.unique(groups, return_index=True, return_inverse=True)
        means = np.bincount(index, weights=log_y) / np.bincount(index)
        centre, scale = float(means.mean()), float(means.std()) or 1.0
        with warnings.catch_warnings():   # a length scale at its bound: that input does not matter
            warnings.simplefilter("ignore", ConvergenceWarning)
            regressor = self._regressor(Z.shape[1], seed, kernel).fit(Z[first], (means - centre) / scale)
        return regressor, Z[first], centre, scale

    def fit(self, X, y, groups=None, feature_names=None):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64, y_numeric=True)
        y = y.astype(float)
        check_runtimes(y)
        groups = np.arange(len(y)) if groups is None else np.asarray(groups)
        n_configurations = np.unique(groups).size
        if n_configurations > self.max_configurations:
            raise LearnerNotApplicable(f"{n_configurations} configurations: the Gaussian process is fitted "
                                       f"on at most {self.max_configurations} (its fit grows as their cube)")
        if n_configurations < self.min_configurations:
            raise LearnerNotApplicable(f"{n_configurations} configurations: the Gaussian process needs at least "
                                       f"{self.min_configurations} to learn a length scale per input")
        seed = np.random.RandomState(self.random_state).randint(2**31 - 1)
        fill = np.nanmedian(X, axis=0) if X.shape[0] else np.zeros(X.shape[1])
        self.fill_ = np.where(np.isnan(fill), 0.0, fill)
        self.log_columns_ = np.all(np.where(np.isnan(X), self.fill_, X) > 0, axis=0)
        L = fill_and_log(X, self.fill_, self.log_columns_)
        self.x_mean_ = L.mean(axis=0)
        std = L.std(axis=0)
        self.x_scale_ = np.where(std > 0, std, 1.0)
        Z = (L - self.x_mean_) / self.x_scale_
        log_y = np.log(y)
        regressor, self.train_, self.y_centre_, self.y_scale_ = self._fit_means(Z, log_y, groups, seed)
        self.kernel_ = regressor.kernel_
        self.log_marginal_likelihood_ = float(regressor.log_marginal_likelihood_value_)
        self.alpha_ = np.asarray(regressor.alpha_, dtype=float).ravel()
        product, self.sigma_0_ = self.kernel_.k1.k1, float(self.kernel_.k1.k2.sigma_0)
        self.constant_ = float(product.k1.constant_value)
        self.length_scale_ = np.broadcast_to(np.asarray(product.k2.length_scale, dtype=float), (Z.shape[1],)).copy()
        n_folds = min(self.calibration_folds or 0, n_configurations)
        scores = []
        if n_folds >= 2:
            for held_out in trainable_folds(groups, n_folds, seed):
                fold, train, centre, scale = self._fit_means(Z[~held_out], log_y[~held_out], groups[~held_out],
                                                             seed, kernel=self.kernel_)
                m = centre + scale * fold.predict(Z[held_out])
                scores.append(np.abs(log_y[held_out] - m))
        self.calibration_scores_ = np.sort(np.concatenate(scores)) if scores else np.zeros(0)
        return self

    def artifact(self) -> tuple[dict, dict]:
        """(arrays, JSON settings) of the served form (:mod:`hpcpredict.daemon.runtime.artifacts`)."""
        check_is_fitted(self, "alpha_")
        arrays = {"fill": self.fill_, "log_columns": self.log_columns_.astype(np.int8),
                  "mean": self.x_mean_, "scale": self.x_scale_, "train": self.train_,
                  "alpha": self.alpha_, "length_scale": self.length_scale_,
                  "kernel": np.asarray([self.constant_, self.sigma_0_]),
                  "target": np.asarray([self.y_centre_, self.y_scale_]),
                  "calibration_scores": np.asarray(self.calibration_scores_, dtype=float)}
        return arrays, {}

    def predict_log_dist(self, X):
        check_is_fitted(self, "alpha_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        Z = (fill_and_log(X, self.fill_, self.log_columns_) - self.x_mean_) / self.x_scale_
        k = kernel_row(Z, self.train_, self.length_scale_, self.constant_, self.sigma_0_)
        m = self.y_centre_ + self.y_scale_ * (k @ self.alpha_)
        return m, np.ones_like(m)
