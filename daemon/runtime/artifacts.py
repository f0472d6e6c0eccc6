"""Learner arrays of a runtime-model artifact: pack a fitted learner, unpack a served predictor.

Two learners can be served, each stored as plain arrays (``np.savez``, no pickle):

* ``extra-trees`` (format ``hpcpredict-runtime-extra-trees``): the compiled forest
  (:class:`~hpcpredict.daemon.runtime.compiled.CompiledForest`), the feature transform and the
  log-log trend — the layout of every artifact published before the ANN could be served;
* ``ann`` (format ``hpcpredict-runtime-ann``): the members' stacked weights and the ensemble's
  preprocessing (:class:`~hpcpredict.daemon.runtime.compiled_ann.CompiledEnsemble`).

Both carry ``calibration_scores``: held-out |log y − m| / s, so the served interval is
m ± q·s with the conformal multiplier q, whatever the learner. A predictor's
:meth:`log_dist` takes one encoded input vector and returns (m, s) of log runtime.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelArtifactError
from .compiled import CompiledForest, log_linear_trend, transform_features
from .compiled_ann import CompiledEnsemble

FORMATS = {"extra-trees": "hpcpredict-runtime-extra-trees", "ann": "hpcpredict-runtime-ann"}
LEARNER_OF_FORMAT = {value: key for key, value in FORMATS.items()}
FORMAT_VERSION = 1
SERVABLE = tuple(FORMATS)


def pack(estimator) -> tuple[str, dict[str, np.ndarray], dict]:
    """(learner name, arrays, JSON settings) of a fitted extra-trees or ANN runtime learner."""
    from .ann import ANNEnsemble
    from .trees import ExtraTreesRuntime

    if isinstance(estimator, ExtraTreesRuntime) and hasattr(estimator, "compiled_"):
        arrays = dict(estimator.compiled_.arrays(), fill=estimator.fill_, powers=estimator.powers_,
                      mean=estimator.mean_, scale=estimator.scale_,
                      kept=np.asarray(estimator.kept_, dtype=np.int64),
                      calibration_scores=estimator.calibration_scores_,
                      log_columns=estimator.log_columns_.astype(np.int8), trend_coef=estimator.trend_coef_,
                      trend_intercept=np.asarray([estimator.trend_intercept_]))
        return "extra-trees", arrays, {"n_trees": len(estimator.compiled_.roots)}
    if isinstance(estimator, ANNEnsemble) and hasattr(estimator, "members_"):
        compiled = CompiledEnsemble.from_sklearn(estimator)
        arrays = dict(compiled.arrays(), calibration_scores=np.asarray(estimator.calibration_scores_, dtype=float))
        return "ann", arrays, {"ann": compiled.settings()}
    raise ModelArtifactError(f"only fitted {' or '.join(SERVABLE)} runtime models can be saved")


class ForestPredictor:
    """Served extra-trees: transform → compiled forest (+ log-log trend)."""

    learner = "extra-trees"

    def __init__(self, arrays: dict, n_inputs: int):
        self.forest = CompiledForest.from_arrays(arrays)
        try:
            self.fill, self.powers, self.mean, self.scale = (arrays[k].astype(float)
                                                             for k in ("fill", "powers", "mean", "scale"))
            self.kept = arrays["kept"].astype(np.int64)
            self.log_columns = arrays["log_columns"].astype(bool)
            self.trend_coef = arrays["trend_coef"].astype(float)
            self.trend_intercept = float(arrays["trend_intercept"].ravel()[0])
        except (KeyError, ValueError, TypeError, IndexError) as error:
            raise ModelArtifactError(f"extra-trees arrays: {error}") from error
        if (self.powers.shape != (self.mean.size, n_inputs) or self.fill.size != n_inputs
                or self.scale.size != self.mean.size or self.kept.size == 0
                or self.kept.min() < 0 or self.kept.max() >= self.mean.size
                or self.forest.feature.max() >= self.kept.size
                or self.log_columns.size != n_inputs or self.trend_coef.size != n_inputs):
            raise ModelArtifactError("array shapes do not match")

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        z = transform_features(vector, self.fill, self.powers, self.mean, self.scale, self.kept)
        m, s = self.forest.mean_std(z)
        m = m + log_linear_trend(vector, self.fill, self.log_columns, self.trend_coef, self.trend_intercept)
        return float(m[0]), float(s[0])

    def describe(self) -> str:
        return (f"extra-trees model ({self.forest.roots.size} trees"
                f"{', log-log trend' if self.trend_coef.any() else ''})")

    def interval_method(self) -> str:
        return "per-tree mean/variance"


class EnsemblePredictor:
    """Served ANN ensemble: every member's forward pass at once (numpy)."""

    learner = "ann"

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
        self.ensemble = CompiledEnsemble.from_arrays(arrays, settings)
        if self.ensemble.fill.size != n_inputs:
            raise ModelArtifactError("array shapes do not match")

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        return self.ensemble.log_dist_one(vector)

    def describe(self) -> str:
        sizes = "x".join(str(h) for h in self.ensemble.settings()["hidden_layer_sizes"]) or "0"
        return f"ANN ensemble ({self.ensemble.n_members} nets, hidden {sizes}, {self.ensemble.activation})"

    def interval_method(self) -> str:
        return "members' spread"


def unpack(learner: str, arrays: dict, n_inputs: int, settings: dict):
    """The served predictor of an artifact's arrays (ModelArtifactError when inconsistent)."""
    if learner == "extra-trees":
        return ForestPredictor(arrays, n_inputs)
    if learner == "ann":
        if not isinstance(settings, dict):
            raise ModelArtifactError("ANN settings missing")
        return EnsemblePredictor(arrays, n_inputs, settings)
    raise ModelArtifactError(f"unknown learner {learner!r}")
