"""A fitted GradientBoostingRegressor as flat arrays: single-row predictions without sklearn.

sklearn's ``predict`` costs ~0.6 ms for one row (input validation, per-call allocation) even
when the trees themselves take microseconds; the daemon predicts one row per request. The
trees are walked by :class:`hpcpredict.daemon.runtime.compiled.CompiledForest` (the same
flat node arrays the runtime models use); a GBRT's answer is

    init + learning_rate * sum of the trees' leaf values

Inputs are rounded to float32 first, as sklearn does before comparing with the thresholds,
so the leaves — and the answer, up to summation order — are sklearn's.

>>> import numpy as np
>>> from sklearn.ensemble import GradientBoostingRegressor
>>> X = np.random.default_rng(0).random((200, 3)); y = X @ [1.0, 2.0, 3.0]
>>> gbrt = GradientBoostingRegressor(n_estimators=20, random_state=0).fit(X, y)
>>> compiled = CompiledGBRT.from_sklearn(gbrt)
>>> bool(np.allclose(compiled.predict(X), gbrt.predict(X), rtol=1e-12))
True
>>> bool(abs(compiled.predict_row(X[0]) - gbrt.predict(X[:1])[0]) < 1e-12)
True
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..errors import ModelArtifactError
from ..runtime.compiled import CompiledForest


class CompiledGBRT:
    def __init__(self, forest: CompiledForest, init: float, learning_rate: float, n_features: int):
        self.forest = forest
        self.init, self.learning_rate, self.n_features = float(init), float(learning_rate), int(n_features)

    @classmethod
    def from_sklearn(cls, gbrt) -> "CompiledGBRT":
        """Compile a fitted single-output ``GradientBoostingRegressor``."""
        estimators = getattr(gbrt, "estimators_", None)
        if estimators is None or estimators.ndim != 2 or estimators.shape[1] != 1:
            raise ModelArtifactError("compiled GBRT: needs a fitted single-output GradientBoostingRegressor")
        n_features = int(gbrt.n_features_in_)
        if isinstance(gbrt.init_, str):          # init="zero"
            init = 0.0
        else:                                    # a constant (DummyRegressor: median for absolute_error)
            init = float(np.ravel(gbrt.init_.predict(np.zeros((1, n_features))))[0])
        forest = CompiledForest.from_sklearn(SimpleNamespace(estimators_=list(estimators[:, 0])))
        return cls(forest, init, gbrt.learning_rate, n_features)

    def _check(self, X: np.ndarray) -> np.ndarray:
        if X.shape[-1] != self.n_features:
            raise ValueError(f"compiled GBRT expects {self.n_features} features, got {X.shape[-1]}")
        # sklearn compares float32 inputs with float64 thresholds; round the same way.
        return X.astype(np.float32).astype(np.float64)

    def predict_row(self, x) -> float:
        """One row (1-D, ``n_features`` values) → the regressor's prediction."""
        z = self._check(np.asarray(x, dtype=float).ravel())
        leaves = self.forest.leaves(z[None, :])[0]
        return self.init + self.learning_rate * float(self.forest.value[leaves].sum())

    def predict(self, X) -> np.ndarray:
        """Many rows at once (the batched walk of every tree)."""
        Z = self._check(np.atleast_2d(np.asarray(X, dtype=float)))
        if Z.shape[0] == 1:
            return np.array([self.predict_row(Z[0])])
        return self.init + self.learning_rate * self.forest.value[self.forest.leaves(Z)].sum(axis=1)

    # -- pickle-free storage (np.savez / np.load(allow_pickle=False)) ---------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        data = self.forest.arrays()
        data["gbrt"] = np.array([self.init, self.learning_rate, self.n_features], dtype=float)
        return data

    @classmethod
    def from_arrays(cls, data) -> "CompiledGBRT":
        try:
            init, learning_rate, n_features = np.asarray(data["gbrt"], dtype=float).ravel()[:3]
        except (KeyError, ValueError, TypeError) as error:
            raise ModelArtifactError(f"compiled GBRT: missing or bad 'gbrt' array: {error}") from error
        forest = CompiledForest.from_arrays(data)
        if not (np.isfinite([init, learning_rate]).all() and n_features >= 1
                and forest.feature.max() < n_features):
            raise ModelArtifactError("compiled GBRT: inconsistent arrays")
        return cls(forest, init, learning_rate, int(n_features))
