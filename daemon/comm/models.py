"""Learned models of seed 004: GBRT with least-absolute-deviation loss per feature class.

* Class A uses (n, ppn, l, PD, PM); class B adds the mapping features; class C adds the
  placement features, first ranked by recursive feature elimination with a linear SVR
  (``RFECV``, 15-40 kept; inputs log1p-scaled and standardised for the linear model).
* Target: log2 of the phase time. Times span five orders of magnitude and the metrics are
  relative errors; LAD on the log target fits the median ratio, which is what MMRE/Pred25
  reward (the paper fits raw time; we state the difference in the benchmark report).
* Hyper-parameters by cross-validated random search over the paper's ranges, trimmed to what
  a shared 2-core machine fits in minutes (see ``TUNE_SPACE``).

Saved as skops files loaded with an explicit list of trusted types (never pickle). On fit and
on load the trees are also compiled to flat arrays (:mod:`.compiled`): the daemon's one-row
predictions walk those (tens of µs) instead of calling sklearn (~0.6 ms of per-call overhead).
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from .compiled import CompiledGBRT
from ..errors import ModelArtifactError

logger = logging.getLogger(__name__)

# Paper ranges: n_estimators 100-2000, learning_rate 0.001-1, min_samples_leaf 1-5,
# min_samples_split 2-8, max_depth 3-8. The slow corner (2000 trees at lr 0.001) is left out:
# on the log target it does not converge in fewer trees and costs 10x the CPU.
TUNE_SPACE = {
    "n_estimators": [200, 400, 700],
    "learning_rate": [0.03, 0.06, 0.1, 0.2],
    "min_samples_leaf": [1, 2, 3, 4, 5],
    "min_samples_split": [2, 4, 6, 8],
    "max_depth": [3, 4, 5, 6, 7, 8],
}
DEFAULT_PARAMS = {"n_estimators": 400, "learning_rate": 0.1, "min_samples_leaf": 3,
                  "min_samples_split": 4, "max_depth": 6}
RFE_MIN, RFE_MAX = 15, 40
TUNE_SAMPLES = 1500   # the search runs on a random subset this large; the final fit uses all

TRUSTED_TYPES = [
    "sklearn.ensemble._gb.GradientBoostingRegressor",
    "sklearn.tree._classes.DecisionTreeRegressor",
    "sklearn.tree._tree.Tree",
    "sklearn._loss.loss.AbsoluteError",
    "sklearn._loss.link.IdentityLink",
    "sklearn._loss.link.Interval",
    "sklearn.dummy.DummyRegressor",
    "numpy.random.mtrand.RandomState",
    "numpy.random._mt19937.MT19937",
    "builtins.slice",
    "collections.OrderedDict",
]


def _gbrt(params: dict, seed: int):
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(loss="absolute_error", random_state=seed, **params)


def tune_gbrt(X: np.ndarray, y_log: np.ndarray, n_iter: int, seed: int) -> dict:
    """Random search with 3-fold CV (MAE of log2 time); ``n_iter=0`` keeps the defaults."""
    if n_iter <= 0 or len(y_log) < 30:
        return dict(DEFAULT_PARAMS)
    from sklearn.model_selection import KFold, RandomizedSearchCV

    search = RandomizedSearchCV(_gbrt({}, seed), TUNE_SPACE, n_iter=n_iter, cv=KFold(3, shuffle=True, random_state=seed),
                                scoring="neg_mean_absolute_error", random_state=seed, refit=False)
    if len(y_log) > TUNE_SAMPLES:
        keep = np.random.default_rng(seed).choice(len(y_log), TUNE_SAMPLES, replace=False)
        X, y_log = X[keep], y_log[keep]
    search.fit(X, y_log)
    logger.info("GBRT tuning: best %s (MAE log2 %.3f)", search.best_params_, -search.best_score_)
    return dict(search.best_params_)


def rank_features(X: np.ndarray, y_log: np.ndarray, names: tuple[str, ...], seed: int) -> list[str]:
    """RFE with a linear SVR ranks the features; keep the top k, k in 15..40 by GBRT CV.

    The SVR ranking is the paper's; how many to keep is chosen by 3-fold CV of a small GBRT
    (the model that will use them) on at most ``TUNE_SAMPLES`` rows, because the linear
    model's own CV optimum (RFECV) sits at the lower bound and drops features the trees use.
    """
    if len(names) <= RFE_MIN:
        return list(names)
    from sklearn.feature_selection import RFE
    from sklearn.model_selection import KFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler
    from sklearn.svm import LinearSVR

    scaled = make_pipeline(FunctionTransformer(np.log1p), StandardScaler()).fit_transform(X)
    svr = LinearSVR(C=1.0, epsilon=0.0, max_iter=20000, random_state=seed, dual="auto")
    ranking = RFE(svr, n_features_to_select=1, step=1).fit(scaled, y_log).ranking_
    order = np.argsort(ranking, kind="stable")
    rows = np.arange(len(y_log))
    if rows.size > TUNE_SAMPLES:
        rows = np.random.default_rng(seed).choice(rows, TUNE_SAMPLES, replace=False)
    best_k, best = RFE_MIN, -np.inf
    for k in range(RFE_MIN, min(RFE_MAX, len(names)) + 1, 5):
        quick = _gbrt({"n_estimators": 150, "learning_rate": 0.1, "max_depth": 6, "min_samples_leaf": 3}, seed)
        score = cross_val_score(quick, X[np.ix_(rows, order[:k])], y_log[rows],
                                cv=KFold(3, shuffle=True, random_state=seed),
                                scoring="neg_mean_absolute_error").mean()
        logger.info("RFE: top %d features, CV MAE(log2 t) %.4f", k, -score)
        if score > best:
            best_k, best = k, score
    return [names[i] for i in order[:best_k]]


class ClassModel:
    """One GBRT on named features, predicting seconds (trained on log2 seconds)."""

    def __init__(self, feature_class: str, features: list[str], params: dict | None = None):
        self.feature_class, self.features, self.params = feature_class, list(features), params or {}

    def fit(self, X: np.ndarray, names: tuple[str, ...], y: np.ndarray, seed: int = 0):
        cols = [names.index(f) for f in self.features]
        self.estimator_ = _gbrt(self.params, seed).fit(X[:, cols], np.log2(y))
        self.compiled_ = CompiledGBRT.from_sklearn(self.estimator_)
        return self

    def predict(self, X: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
        cols = [names.index(f) for f in self.features]
        return np.exp2(self.estimator_.predict(X[:, cols]))

    def predict_row(self, row: dict[str, float]) -> float:
        """One request's features → seconds, from the compiled trees (equal to sklearn's)."""
        x = np.fromiter((row[f] for f in self.features), dtype=float, count=len(self.features))
        return float(np.exp2(self.compiled_.predict_row(x)))

    def save(self, path: Path) -> None:
        import skops.io as sio

        sio.dump(self.estimator_, path)

    def load_estimator(self, path: Path) -> "ClassModel":
        import skops.io as sio

        try:
            untrusted = sio.get_untrusted_types(file=path)
        except Exception as error:  # skops raises several kinds on a corrupt file
            raise ModelArtifactError(f"{path}: not a readable skops file: {error}") from error
        unexpected = sorted(set(untrusted) - set(TRUSTED_TYPES))
        if unexpected:
            raise ModelArtifactError(f"{path}: refusing untrusted types {unexpected}")
        try:
            self.estimator_ = sio.load(path, trusted=untrusted)
        except Exception as error:
            raise ModelArtifactError(f"{path}: cannot load model: {error}") from error
        if getattr(self.estimator_, "n_features_in_", None) != len(self.features):
            raise ModelArtifactError(f"{path}: model expects {getattr(self.estimator_, 'n_features_in_', '?')} "
                                     f"features, manifest lists {len(self.features)}")
        try:
            self.compiled_ = CompiledGBRT.from_sklearn(self.estimator_)
        except (AttributeError, TypeError, ValueError) as error:
            raise ModelArtifactError(f"{path}: not a gradient-boosted regressor: {error!r}") from error
        return self
