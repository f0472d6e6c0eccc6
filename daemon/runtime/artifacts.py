"""Learner arrays of a runtime-model artifact: pack a fitted learner, unpack a served predictor.

Seven learners can be served, each stored as plain arrays (``np.savez``, no pickle):

* ``extra-trees`` (format ``hpcpredict-runtime-extra-trees``): the compiled forest
  (:class:`~hpcpredict.daemon.runtime.compiled.CompiledForest`), the feature transform and the
  log-log trend — the layout of every artifact published before the ANN could be served;
* ``ann`` (format ``hpcpredict-runtime-ann``): the members' stacked weights and the ensemble's
  preprocessing (:class:`~hpcpredict.daemon.runtime.compiled_ann.CompiledEnsemble`);
* ``boosted-trees`` (format ``hpcpredict-runtime-boosted-trees``): the log-log trend and the
  boosted trees of the centre (and of the 10 %/90 % quantiles, when the interval uses them),
  each a compiled forest whose trees are summed;
* ``log-linear`` (format ``hpcpredict-runtime-log-linear``): the log-log trend alone;
* ``startup-steps`` (format ``hpcpredict-runtime-startup-steps``): two log-log trends over the
  same filled, logged inputs, the start-up s and the cost per step w, and the column of the
  number of steps n (named in ``steps_input``): runtime exp(s) + n · exp(w);
* ``gaussian-process`` (format ``hpcpredict-runtime-gaussian-process``): the input transform
  (fill, log columns, centre and scale), the training configurations, the weights ``alpha`` of
  the kernel row, the kernel's length scales and its ``constant`` and ``sigma_0``, and the log
  runtime's centre and scale: :func:`~.gaussian_process.kernel_row` · alpha;
* ``blend`` (format ``hpcpredict-runtime-blend``): each member's arrays as that member's own
  format packs them, prefixed ``member<i>_``, its learner and settings listed in
  ``blend_members``; served as the mean of the members' log predictions.

Every format carries ``calibration_scores``: held-out |log y − m| / s, so the served interval is
m ± q·s with the conformal multiplier q, whatever the learner. A predictor's
:meth:`log_dist` takes one encoded input vector and returns (m, s) of log runtime.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ModelArtifactError
from .compiled import CompiledForest, log_linear_trend, transform_features
from .compiled_ann import CompiledEnsemble

FORMATS = {"extra-trees": "hpcpredict-runtime-extra-trees", "ann": "hpcpredict-runtime-ann",
           "boosted-trees": "hpcpredict-runtime-boosted-trees", "log-linear": "hpcpredict-runtime-log-linear",
           "blend": "hpcpredict-runtime-blend", "startup-steps": "hpcpredict-runtime-startup-steps",
           "gaussian-process": "hpcpredict-runtime-gaussian-process"}
BOOSTED_PARTS = ("centre", "lower", "upper")
LEARNER_OF_FORMAT = {value: key for key, value in FORMATS.items()}
# The layout version of every format. A new learner is a new format string, not a new version:
# the blend left the other formats' layouts, and so their artifacts, unchanged (a daemon older
# than the blend refuses a blend artifact as "not a runtime model artifact").
FORMAT_VERSION = 1
SERVABLE = tuple(FORMATS)


def pack(estimator) -> tuple[str, dict[str, np.ndarray], dict]:
    """(learner name, arrays, JSON settings) of a fitted runtime learner that can be served."""
    from .ann import ANNEnsemble
    from .blend import BlendRuntime
    from .boosting import BoostedTreesRuntime
    from .gaussian_process import GaussianProcessRuntime
    from .loglinear import LogLinearRuntime
    from .startup_steps import StartupStepsRuntime
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
    if isinstance(estimator, BoostedTreesRuntime) and hasattr(estimator, "parts_"):
        parts = estimator.parts_
        arrays = _trend_arrays(parts["fill"], parts["log_columns"], parts["coef"], parts["intercept"], parts["pairs"])
        arrays["calibration_scores"] = np.asarray(estimator.calibration_scores_, dtype=float)
        for name in BOOSTED_PARTS:
            if name in parts:
                forest, baseline = parts[name]
                arrays.update({f"{name}_{key}": value for key, value in forest.arrays().items()})
                arrays[f"{name}_baseline"] = np.asarray([baseline])
        return "boosted-trees", arrays, {"boosted_parts": [name for name in BOOSTED_PARTS if name in parts]}
    if isinstance(estimator, LogLinearRuntime) and hasattr(estimator, "coef_"):
        arrays = _trend_arrays(estimator.fill_, estimator.log_columns_, estimator.coef_, estimator.intercept_,
                               estimator.pairs_)
        arrays["calibration_scores"] = np.asarray(estimator.calibration_scores_, dtype=float)
        if getattr(estimator, "startup_", 0.0) > 0:  # absent: no start-up term (earlier artifacts load unchanged)
            arrays["startup_s"] = np.asarray([estimator.startup_], dtype=float)
        return "log-linear", arrays, {}
    if isinstance(estimator, StartupStepsRuntime) and hasattr(estimator, "startup_coef_"):
        arrays = {f"{part}_{key}": value for part, (coef, intercept, pairs) in (
            ("startup", (estimator.startup_coef_, estimator.startup_intercept_, estimator.startup_pairs_)),
            ("step", (estimator.step_coef_, estimator.step_intercept_, estimator.step_pairs_)))
            for key, value in _trend_arrays(estimator.fill_, estimator.log_columns_, coef, intercept, pairs).items()}
        arrays.update(steps_column=np.asarray([estimator.steps_column_], dtype=np.int64),
                      calibration_scores=np.asarray(estimator.calibration_scores_, dtype=float))
        return "startup-steps", arrays, {"steps_input": estimator.steps_name_}
    if isinstance(estimator, GaussianProcessRuntime) and hasattr(estimator, "alpha_"):
        arrays = {"fill": estimator.fill_, "log_columns": estimator.log_columns_.astype(np.int8),
                  "mean": estimator.x_mean_, "scale": estimator.x_scale_, "train": estimator.train_,
                  "alpha": estimator.alpha_, "length_scale": estimator.length_scale_,
                  "kernel": np.asarray([estimator.constant_, estimator.sigma_0_]),
                  "target": np.asarray([estimator.y_centre_, estimator.y_scale_]),
                  "calibration_scores": np.asarray(estimator.calibration_scores_, dtype=float)}
        return "gaussian-process", arrays, {}
    if isinstance(estimator, BlendRuntime) and hasattr(estimator, "members_"):
        arrays = {"calibration_scores": np.asarray(estimator.calibration_scores_, dtype=float)}
        members = []
        for i, (_, member) in enumerate(estimator.members_):
            learner, member_arrays, settings = pack(member)
            if learner == "blend":
                raise ModelArtifactError("a blend cannot contain a blend")
            arrays.update({f"member{i}_{key}": value for key, value in member_arrays.items()})
            members.append({"learner": learner, "settings": settings})
        return "blend", arrays, {"blend_members": members}
    raise ModelArtifactError(f"only fitted {', '.join(SERVABLE)} runtime models can be saved")


def _trend_arrays(fill, log_columns, coef, intercept, pairs=None) -> dict[str, np.ndarray]:
    arrays = {"fill": np.asarray(fill, dtype=float), "log_columns": np.asarray(log_columns).astype(np.int8),
              "trend_coef": np.asarray(coef, dtype=float), "trend_intercept": np.asarray([intercept], dtype=float)}
    if pairs is not None and len(pairs):  # absent: a first-order trend (artifacts written before pairs load unchanged)
        arrays["trend_pairs"] = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return arrays


class _Trend:
    """The log-log trend of a served model: log runtime linear in log(positive inputs)."""

    def __init__(self, arrays: dict, n_inputs: int):
        try:
            self.fill = arrays["fill"].astype(float)
            self.log_columns = arrays["log_columns"].astype(bool)
            self.coef = arrays["trend_coef"].astype(float)
            self.intercept = float(arrays["trend_intercept"].ravel()[0])
            self.pairs = np.asarray(arrays.get("trend_pairs", np.zeros((0, 2))), dtype=np.int64).reshape(-1, 2)
        except (KeyError, ValueError, TypeError, IndexError) as error:
            raise ModelArtifactError(f"trend arrays: {error}") from error
        if not (self.fill.shape == self.log_columns.shape == (n_inputs,)
                and self.coef.shape == (n_inputs + len(self.pairs),)):
            raise ModelArtifactError("array shapes do not match")
        if self.pairs.size and (self.pairs.min() < 0 or self.pairs.max() >= n_inputs):
            raise ModelArtifactError("trend pairs name columns that do not exist")

    def inputs(self, vector: np.ndarray) -> np.ndarray:
        from .compiled import fill_and_log
        return fill_and_log(vector, self.fill, self.log_columns)

    def value(self, z: np.ndarray) -> float:
        """The trend at the (filled, logged) inputs ``z`` of one row."""
        from .compiled import with_pairs
        return float(with_pairs(z, self.pairs)[0] @ self.coef + self.intercept)


class LogLinearPredictor:
    """Served log-log trend: one dot product."""

    learner = "log-linear"

    def __init__(self, arrays: dict, n_inputs: int):
        self.trend = _Trend(arrays, n_inputs)
        try:
            self.startup = float(np.asarray(arrays.get("startup_s", [0.0]), dtype=float).ravel()[0])
        except (ValueError, TypeError, IndexError) as error:
            raise ModelArtifactError(f"start-up time: {error}") from error
        if not (math.isfinite(self.startup) and self.startup >= 0):
            raise ModelArtifactError(f"start-up time must be finite and >= 0: {self.startup}")
        self._log_startup = math.log(self.startup) if self.startup > 0 else None

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        m = self.trend.value(self.trend.inputs(vector))
        if self._log_startup is not None:
            m = float(np.logaddexp(self._log_startup, m))
        return m, 1.0

    def describe(self) -> str:
        if self.startup > 0:
            return f"log-linear model (runtime {self.startup:.3g} s of start-up + a product of powers of the inputs)"
        return "log-linear model (runtime a product of powers of the inputs)"

    def interval_method(self) -> str:
        return "constant factor"


class StartupStepsPredictor:
    """Served start-up + steps × per-step model: two dot products and a log-sum-exp."""

    learner = "startup-steps"

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
        self.startup, self.step = (_Trend({key[len(part) + 1:]: value for key, value in arrays.items()
                                           if key.startswith(f"{part}_")}, n_inputs) for part in ("startup", "step"))
        try:
            self.column = int(np.asarray(arrays["steps_column"], dtype=np.int64).ravel()[0])
        except (KeyError, ValueError, TypeError, IndexError) as error:
            raise ModelArtifactError(f"steps column: {error}") from error
        if not 0 <= self.column < n_inputs:
            raise ModelArtifactError(f"steps column {self.column} does not exist")
        name = settings.get("steps_input") if isinstance(settings, dict) else None
        if not isinstance(name, str):
            raise ModelArtifactError("start-up + steps settings: steps input missing")
        self.name = name

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        z = self.startup.inputs(vector)
        n = float(vector[self.column]) if math.isfinite(vector[self.column]) else float(self.startup.fill[self.column])
        z[:, self.column] = 0.0   # the trends read every input but the steps
        s = self.startup.value(z)
        if n <= 0:
            return s, 1.0
        return float(np.logaddexp(s, math.log(n) + self.step.value(z))), 1.0

    def describe(self) -> str:
        return (f"start-up + steps model (runtime a start-up + {self.name} × a cost per step, "
                "each a function of the inputs)")

    def interval_method(self) -> str:
        return "constant factor"


class GaussianProcessPredictor:
    """Served Gaussian process: one kernel row against the training configurations, one dot product."""

    learner = "gaussian-process"

    def __init__(self, arrays: dict, n_inputs: int):
        try:
            self.fill, self.mean, self.scale, self.alpha, self.length_scale, kernel, target = (
                np.asarray(arrays[key], dtype=float)
                for key in ("fill", "mean", "scale", "alpha", "length_scale", "kernel", "target"))
            self.log_columns = np.asarray(arrays["log_columns"]).astype(bool)
            self.train = np.asarray(arrays["train"], dtype=float)
            (self.constant, self.sigma_0), (self.centre, self.target_scale) = kernel.tolist(), target.tolist()
        except (KeyError, ValueError, TypeError) as error:
            raise ModelArtifactError(f"gaussian-process arrays: {error}") from error
        n = self.alpha.size
        if not (self.fill.shape == self.log_columns.shape == self.mean.shape == self.scale.shape
                == self.length_scale.shape == (n_inputs,) and self.train.shape == (n, n_inputs) and n > 0):
            raise ModelArtifactError("array shapes do not match")
        values = (self.fill, self.mean, self.scale, self.alpha, self.length_scale, self.train, kernel, target)
        if not all(np.isfinite(v).all() for v in values):
            raise ModelArtifactError("gaussian-process arrays: values must be finite")
        if (self.scale <= 0).any() or (self.length_scale <= 0).any() or self.target_scale <= 0:
            raise ModelArtifactError("gaussian-process arrays: scales must be positive")

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        from .compiled import fill_and_log
        from .gaussian_process import kernel_row

        z = (fill_and_log(vector, self.fill, self.log_columns) - self.mean) / self.scale
        k = kernel_row(z, self.train, self.length_scale, self.constant, self.sigma_0)
        return float(self.centre + self.target_scale * (k @ self.alpha)[0]), 1.0

    def describe(self) -> str:
        return f"Gaussian-process model (a smooth surface through {self.alpha.size} configurations)"

    def interval_method(self) -> str:
        return "constant factor"


class BoostedPredictor:
    """Served boosted trees: log-log trend + the sum of the centre's trees (+ quantile trees)."""

    learner = "boosted-trees"

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
        self.trend = _Trend(arrays, n_inputs)
        names = settings.get("boosted_parts") if isinstance(settings, dict) else None
        if not isinstance(names, list) or "centre" not in names or not set(names) <= set(BOOSTED_PARTS):
            raise ModelArtifactError("boosted-trees settings: parts missing")
        self.parts = {}
        for name in names:
            prefix = f"{name}_"
            forest = CompiledForest.from_arrays({k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)})
            try:
                baseline = float(arrays[f"{name}_baseline"].ravel()[0])
            except (KeyError, IndexError, ValueError) as error:
                raise ModelArtifactError(f"boosted-trees baseline: {error}") from error
            if forest.feature.max() >= n_inputs:
                raise ModelArtifactError("array shapes do not match")
            self.parts[name] = (forest, baseline)
        if ("lower" in self.parts) != ("upper" in self.parts):
            raise ModelArtifactError("boosted-trees: one quantile model without the other")

    def _sum(self, name: str, z: np.ndarray) -> float:
        forest, baseline = self.parts[name]
        return float(forest.tree_predictions(z)[0].sum()) + baseline

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        from .boosting import MIN_SCALE

        z = self.trend.inputs(vector)
        m = self.trend.value(z) + self._sum("centre", z)
        if "lower" not in self.parts:
            return m, 1.0
        return m, max((self._sum("upper", z) - self._sum("lower", z)) / 2, MIN_SCALE)

    def describe(self) -> str:
        return f"boosted-trees model ({self.parts['centre'][0].roots.size} trees, log-log trend)"

    def interval_method(self) -> str:
        return "boosted 10 %/90 % quantiles" if "lower" in self.parts else "constant factor"


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


class BlendPredictor:
    """Served blend: the mean of its members' log predictions (constant-factor interval)."""

    learner = "blend"

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
        members = settings.get("blend_members") if isinstance(settings, dict) else None
        if not isinstance(members, list) or len(members) < 2:
            raise ModelArtifactError("blend settings: members missing")
        self.members = []
        for i, member in enumerate(members):
            if not isinstance(member, dict) or member.get("learner") not in SERVABLE or member["learner"] == "blend":
                raise ModelArtifactError(f"blend member {i}: not a servable learner")
            if not isinstance(member.get("settings"), dict):
                raise ModelArtifactError(f"blend member {i}: settings missing")
            prefix = f"member{i}_"
            member_arrays = {key[len(prefix):]: value for key, value in arrays.items() if key.startswith(prefix)}
            self.members.append(unpack(member["learner"], member_arrays, n_inputs, member["settings"]))

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        return float(np.mean([member.log_dist(vector)[0] for member in self.members])), 1.0

    def describe(self) -> str:
        return "blend (mean in log space) of " + " and ".join(member.describe() for member in self.members)

    def interval_method(self) -> str:
        return "constant factor"


def unpack(learner: str, arrays: dict, n_inputs: int, description: dict):
    """The served predictor of an artifact's arrays and JSON description (ModelArtifactError when inconsistent)."""
    settings = description.get("ann") if learner == "ann" else description
    if learner == "extra-trees":
        return ForestPredictor(arrays, n_inputs)
    if learner == "ann":
        if not isinstance(settings, dict):
            raise ModelArtifactError("ANN settings missing")
        return EnsemblePredictor(arrays, n_inputs, settings)
    if learner == "boosted-trees":
        return BoostedPredictor(arrays, n_inputs, description)
    if learner == "log-linear":
        return LogLinearPredictor(arrays, n_inputs)
    if learner == "blend":
        return BlendPredictor(arrays, n_inputs, description)
    if learner == "startup-steps":
        return StartupStepsPredictor(arrays, n_inputs, description)
    if learner == "gaussian-process":
        return GaussianProcessPredictor(arrays, n_inputs)
    raise ModelArtifactError(f"unknown learner {learner!r}")
