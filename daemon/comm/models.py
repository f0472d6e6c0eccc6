"""A trained class model of seed 004 as the daemon serves it: one GBRT per feature class.

Each :class:`ClassModel` predicts seconds from named features (the GBRT was fitted on log2
seconds by :mod:`hpcpredict.daemon.lab.comm.training`, which also says why). It is stored as a
skops file, loaded with an explicit list of trusted types (never pickle). On fit and on load
the trees are also compiled to flat arrays (:mod:`.compiled`): the daemon's one-row
predictions walk those (tens of µs) instead of calling sklearn (~0.6 ms of per-call overhead).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .compiled import CompiledGBRT
from ..errors import ModelArtifactError

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


class ClassModel:
    """One GBRT on named features, predicting seconds (trained on log2 seconds)."""

    def __init__(self, feature_class: str, features: list[str], params: dict | None = None):
        self.feature_class, self.features, self.params = feature_class, list(features), params or {}

    def attach(self, estimator) -> "ClassModel":
        """Use a fitted ``GradientBoostingRegressor`` (trained on log2 seconds) and its compiled trees."""
        self.estimator_ = estimator
        self.compiled_ = CompiledGBRT.from_sklearn(estimator)
        return self

    def predict(self, X: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
        cols = [names.index(f) for f in self.features]
        return np.exp2(self.estimator_.predict(X[:, cols]))

    def predict_row(self, row: dict[str, float]) -> float:
        """One request's features → seconds, from the compiled trees (equal to sklearn's)."""
        x = np.fromiter((row[f] for f in self.features), dtype=float, count=len(self.features))
        return float(np.exp2(self.compiled_.predict_row(x)))

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
            return self.attach(self.estimator_)
        except (AttributeError, TypeError, ValueError) as error:
            raise ModelArtifactError(f"{path}: not a gradient-boosted regressor: {error!r}") from error
