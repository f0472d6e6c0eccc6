"""Served predictors of runtime-model artifacts, registered by format: unpack an artifact's arrays.

The lab packs a fitted learner into these arrays (:mod:`hpcpredict.daemon.lab.runtime.packing`);
the daemon unpacks them here without importing the lab. A served learner is declared once, with
:func:`served_learner` on its predictor class: its name and format (``hpcpredict-runtime-<name>``).

Seven learners can be served, each stored as plain arrays (``np.savez``, no pickle):

* ``extra-trees`` (format ``hpcpredict-runtime-extra-trees``): the compiled forest
  (:class:`~.compiled.CompiledForest`), the feature transform and the
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
  runtime's centre and scale: :func:`~.compiled.kernel_row` · alpha;
* ``blend`` (format ``hpcpredict-runtime-blend``): each member's arrays as that member's own
  format packs them, prefixed ``member<i>_``, its learner and settings listed in
  ``blend_members``; served as the mean of the members' log predictions.

Every format carries ``calibration_scores``: held-out |log y − m| / s, so the served interval is
m ± q·s with the conformal multiplier q, whatever the learner. A predictor's
:meth:`log_dist` takes one encoded input vector and returns (m, s) of log runtime.
"""
from __future__ import annotations

import math
from typing import Callable, ClassVar, TypeVar

import numpy as np

from ..errors import ModelArtifactError
from ..plugins import NamedRegistry
from .compiled import CompiledForest, fill_and_log, kernel_row, log_linear_trend, transform_features, with_pairs
from .compiled_ann import CompiledEnsemble

BOOSTED_PARTS = ("centre", "lower", "upper")
MIN_SCALE = 1e-3   # log-space scale floor of boosted trees: the quantile models may cross or coincide
# The layout version of every format. A new learner is a new format string, not a new version:
# the blend left the other formats' layouts, and so their artifacts, unchanged (a daemon older
# than the blend refuses a blend artifact as "not a runtime model artifact").
FORMAT_VERSION = 1

PREDICTORS: NamedRegistry = NamedRegistry("runtime model format", ModelArtifactError)


def format_of(learner: str) -> str:
    """The artifact format string of a served learner."""
    return f"hpcpredict-runtime-{learner}"


class ServedPredictor:
    """The base of a served predictor class: ``learner``, the learner it serves, is set by
    :func:`served_learner`."""

    learner: ClassVar[str]


_Predictor = TypeVar("_Predictor", bound=ServedPredictor)


def served_learner(learner: str) -> Callable[[type[_Predictor]], type[_Predictor]]:
    """Class decorator: serve ``learner``'s artifacts (format :func:`format_of`) with this predictor.

    A predictor is built as ``cls(arrays, n_inputs, description)`` from the artifact's arrays
    and JSON description and raises :class:`ModelArtifactError` when they are inconsistent.
    """
    def register(cls: type[_Predictor]) -> type[_Predictor]:
        cls.learner = learner
        return PREDICTORS.register(format_of(learner))(cls)
    return register


def learner_of_format(format_name: object) -> str | None:
    """The learner served for an artifact's ``format``; None when no predictor serves it."""
    if not isinstance(format_name, str) or format_name not in PREDICTORS.names():
        return None
    return PREDICTORS.get(format_name).learner


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
        return fill_and_log(vector, self.fill, self.log_columns)

    def value(self, z: np.ndarray) -> float:
        """The trend at the (filled, logged) inputs ``z`` of one row."""
        return float(with_pairs(z, self.pairs)[0] @ self.coef + self.intercept)


@served_learner("log-linear")
class LogLinearPredictor(ServedPredictor):
    """Served log-log trend: one dot product."""

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
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


@served_learner("startup-steps")
class StartupStepsPredictor(ServedPredictor):
    """Served start-up + steps × per-step model: two dot products and a log-sum-exp."""

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


@served_learner("gaussian-process")
class GaussianProcessPredictor(ServedPredictor):
    """Served Gaussian process: one kernel row against the training configurations, one dot product."""

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
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
        z = (fill_and_log(vector, self.fill, self.log_columns) - self.mean) / self.scale
        k = kernel_row(z, self.train, self.length_scale, self.constant, self.sigma_0)
        return float(self.centre + self.target_scale * (k @ self.alpha)[0]), 1.0

    def describe(self) -> str:
        return f"Gaussian-process model (a smooth surface through {self.alpha.size} configurations)"

    def interval_method(self) -> str:
        return "constant factor"


@served_learner("boosted-trees")
class BoostedPredictor(ServedPredictor):
    """Served boosted trees: log-log trend + the sum of the centre's trees (+ quantile trees)."""

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
        z = self.trend.inputs(vector)
        m = self.trend.value(z) + self._sum("centre", z)
        if "lower" not in self.parts:
            return m, 1.0
        return m, max((self._sum("upper", z) - self._sum("lower", z)) / 2, MIN_SCALE)

    def describe(self) -> str:
        return f"boosted-trees model ({self.parts['centre'][0].roots.size} trees, log-log trend)"

    def interval_method(self) -> str:
        return "boosted 10 %/90 % quantiles" if "lower" in self.parts else "constant factor"


@served_learner("extra-trees")
class ForestPredictor(ServedPredictor):
    """Served extra-trees: transform → compiled forest (+ log-log trend)."""

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
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


@served_learner("ann")
class EnsemblePredictor(ServedPredictor):
    """Served ANN ensemble: every member's forward pass at once (numpy)."""

    def __init__(self, arrays: dict, n_inputs: int, settings: dict):
        ann = settings.get("ann") if isinstance(settings, dict) else None
        if not isinstance(ann, dict):
            raise ModelArtifactError("ANN settings missing")
        self.ensemble = CompiledEnsemble.from_arrays(arrays, ann)
        if self.ensemble.fill.size != n_inputs:
            raise ModelArtifactError("array shapes do not match")

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        return self.ensemble.log_dist_one(vector)

    def describe(self) -> str:
        sizes = "x".join(str(h) for h in self.ensemble.settings()["hidden_layer_sizes"]) or "0"
        return f"ANN ensemble ({self.ensemble.n_members} nets, hidden {sizes}, {self.ensemble.activation})"

    def interval_method(self) -> str:
        return "members' spread"


@served_learner("blend")
class BlendPredictor(ServedPredictor):
    """Served blend: the mean of its members' log predictions (constant-factor interval)."""

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
            self.members.append(unpack(format_of(member["learner"]), member_arrays, n_inputs, member["settings"]))

    def log_dist(self, vector: np.ndarray) -> tuple[float, float]:
        return float(np.mean([member.log_dist(vector)[0] for member in self.members])), 1.0

    def describe(self) -> str:
        return "blend (mean in log space) of " + " and ".join(member.describe() for member in self.members)

    def interval_method(self) -> str:
        return "constant factor"


# The learners whose fitted models can be served (every predictor above declares one).
SERVABLE: tuple[str, ...] = tuple(PREDICTORS.get(name).learner for name in PREDICTORS.names())


def unpack(format_name: str, arrays: dict, n_inputs: int, description: dict):
    """The served predictor of an artifact's arrays and JSON description (ModelArtifactError when
    the format is unknown or the arrays inconsistent)."""
    return PREDICTORS.get(format_name)(arrays, n_inputs, description)
