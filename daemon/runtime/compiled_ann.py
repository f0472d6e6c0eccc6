"""A fitted ANN ensemble as plain numpy arrays: pickle-free storage and the served forward pass.

Every member of an :class:`~hpcpredict.daemon.lab.runtime.ann.ANNEnsemble` is a scikit-learn
``MLPRegressor`` with the same layer sizes, so layer k of all members stacks into one array
``W[k]`` of shape (members, fan_in, fan_out) and one ``b[k]`` (members, fan_out). The forward
pass then runs every member at once with batched matrix products: ``(1, rows, fan_in) @
(members, fan_in, fan_out)``. The input preprocessing (median fill, log of positive inputs,
standardisation) and the target transform (log runtime, standardised) are stored beside them.

No buffers are preallocated across calls: the daemon answers Predict from several threads,
and the arrays of one row (members × 16 floats) are cheaper to allocate than to lock.

>>> import numpy as np
>>> from hpcpredict.daemon.lab.runtime.ann import ANNEnsemble
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(1, 10, size=(60, 2)); y = X[:, 0] * X[:, 1]
>>> ensemble = ANNEnsemble(n_members=3, max_epochs=50, random_state=0).fit(X, y)
>>> compiled = CompiledEnsemble.from_arrays(CompiledEnsemble.from_sklearn(ensemble).arrays())
>>> bool(np.allclose(compiled.log_members(X), np.log(ensemble.predict_members(X)), rtol=1e-12))
True
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ModelArtifactError
from .compiled import fill_and_log

ACTIVATIONS = ("identity", "logistic", "tanh", "relu")
TARGETS = ("log", "weighted")
_FLOOR = 1e-9          # the ensemble's floor on a member's runtime (seconds)
_MAX_LAYERS = 16


def logistic(a: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-a), as scikit-learn's ``logistic`` (SciPy's ``expit``) computes it, without
    importing SciPy into the daemon (490 modules, most of its start). Each side of 0 takes the
    form whose exponential is at most 1, so no input overflows: e^-|a| underflows to 0 at the
    extremes and the value to exactly 0 or 1."""
    a = np.asarray(a, dtype=float)
    small = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + small), small / (1.0 + small))


def _activate(name: str, a: np.ndarray) -> np.ndarray:
    """scikit-learn's hidden activations (same functions, so outputs match to rounding)."""
    if name == "logistic":
        return logistic(a)
    if name == "tanh":
        return np.tanh(a)
    if name == "relu":
        return np.maximum(a, 0.0)
    return a


class CompiledEnsemble:
    """Stacked member weights + preprocessing; :meth:`mean_std` is what Predict calls."""

    def __init__(self, weights, biases, activation: str, fill, log_columns, mean, scale,
                 target: str, y_mean: float, y_scale: float):
        self.weights = [np.asarray(w, dtype=float) for w in weights]
        self.biases = [np.asarray(b, dtype=float)[:, None, :] for b in biases]  # (members, 1, fan_out)
        self.activation = activation
        self.fill, self.mean, self.scale = (np.asarray(a, dtype=float) for a in (fill, mean, scale))
        self.log_columns = np.asarray(log_columns, dtype=bool)
        self.target, self.y_mean, self.y_scale = target, float(y_mean), float(y_scale)
        # One-row pass (Predict): the standardisation folded into the first layer, whose members
        # sit side by side, so the first layer of every member is one vector-matrix product.
        members, fan_in, fan_out = self.weights[0].shape
        first = self.weights[0] / self.scale[None, :, None]
        self._first_w = first.transpose(1, 0, 2).reshape(fan_in, members * fan_out)
        self._first_b = (self.biases[0][:, 0, :] - np.einsum("i,mio->mo", self.mean, first)).ravel()
        self._first_shape = (members, 1, fan_out)
        self._log_index = np.flatnonzero(self.log_columns)
        self._log_floor = float(np.log(_FLOOR))

    @property
    def n_members(self) -> int:
        return self.weights[0].shape[0]

    @classmethod
    def from_sklearn(cls, ensemble) -> "CompiledEnsemble":
        members = ensemble.members_
        n_layers = len(members[0].coefs_)
        if any(len(m.coefs_) != n_layers or m.out_activation_ != "identity" for m in members):
            raise ModelArtifactError("ANN ensemble members differ in shape or output activation")
        weights = [np.stack([m.coefs_[k] for m in members]) for k in range(n_layers)]
        biases = [np.stack([m.intercepts_[k] for m in members]) for k in range(n_layers)]
        return cls(weights, biases, members[0].activation, ensemble.fill_, ensemble.log_columns_,
                   ensemble.mean_, ensemble.scale_, ensemble.target, ensemble.y_mean_, ensemble.y_scale_)

    # -- forward pass --------------------------------------------------------------------
    def standardised(self, X) -> np.ndarray:
        return (fill_and_log(X, self.fill, self.log_columns) - self.mean) / self.scale

    def log_members(self, X) -> np.ndarray:
        """Log runtime predicted by every member: shape (members, rows)."""
        t = self._after_first_layer(self.standardised(X)[None, :, :] @ self.weights[0] + self.biases[0])
        if self.target == "log":
            runtime = np.exp(t * self.y_scale + self.y_mean)
        else:
            runtime = t * self.y_scale
        return np.log(np.maximum(runtime, _FLOOR))

    def _after_first_layer(self, a: np.ndarray) -> np.ndarray:
        """The rest of every member's pass from the first layer's affine output (members,
        rows, fan_out): the network output, shape (members, rows)."""
        for w, b in zip(self.weights[1:], self.biases[1:]):
            a = _activate(self.activation, a) @ w + b
        return a[:, :, 0]

    def mean_std(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Centre and spread of log runtime per row (members' mean and standard deviation)."""
        logs = self.log_members(X)
        # np.mean/np.std's own formula (sum / n; pairwise sums of squared deviations) without
        # their Python-level wrappers: the same numbers, ~15 us less per Predict.
        n = logs.shape[0]
        centre = np.add.reduce(logs, axis=0) / n
        deviation = logs - centre
        spread = np.sqrt(np.add.reduce(deviation * deviation, axis=0) / n)
        return centre, np.maximum(spread, 1e-6)

    def log_dist_one(self, vector: np.ndarray) -> tuple[float, float]:
        """:meth:`mean_std` of one input row, in about a third of its time (same numbers to
        rounding: the standardisation is folded into the first layer's weights)."""
        x = np.where(np.isnan(vector), self.fill, vector)
        logged = self._log_index
        x[logged] = np.log(np.maximum(x[logged], 1e-300))
        t = self._after_first_layer((x @ self._first_w + self._first_b).reshape(self._first_shape))[:, 0]
        if self.target == "log":   # log(exp(u)) = u: no round trip through the runtime
            logs = np.maximum(t * self.y_scale + self.y_mean, self._log_floor)
        else:
            logs = np.log(np.maximum(t * self.y_scale, _FLOOR))
        n = logs.shape[0]
        centre = float(logs.sum()) / n
        deviation = logs - centre
        return centre, max(math.sqrt(float(deviation @ deviation) / n), 1e-6)

    # -- storage -------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        data = {f"W{k}": w for k, w in enumerate(self.weights)}
        data.update({f"b{k}": b[:, 0, :] for k, b in enumerate(self.biases)})
        data.update(fill=self.fill, log_columns=self.log_columns.astype(np.int8), mean=self.mean,
                    scale=self.scale, target_scaling=np.asarray([self.y_mean, self.y_scale]))
        return data

    def settings(self) -> dict:
        """The non-array part, stored in the artifact's JSON."""
        return {"activation": self.activation, "target": self.target, "n_layers": len(self.weights),
                "n_members": self.n_members, "hidden_layer_sizes": [w.shape[2] for w in self.weights[:-1]]}

    @classmethod
    def from_arrays(cls, data, settings: dict | None = None) -> "CompiledEnsemble":
        settings = dict(settings or {})
        activation = settings.get("activation", "logistic")
        target = settings.get("target", "log")
        if activation not in ACTIVATIONS or target not in TARGETS:
            raise ModelArtifactError(f"ANN ensemble: unknown activation {activation!r} or target {target!r}")
        try:
            n_layers = int(settings.get("n_layers", sum(1 for k in data if str(k).startswith("W"))))
            if not 1 <= n_layers <= _MAX_LAYERS:
                raise ValueError(f"{n_layers} layers")
            weights = [np.asarray(data[f"W{k}"]) for k in range(n_layers)]
            biases = [np.asarray(data[f"b{k}"]) for k in range(n_layers)]
            fill, mean, scale = (np.asarray(data[k]) for k in ("fill", "mean", "scale"))
            log_columns = np.asarray(data["log_columns"])
            y_mean, y_scale = np.asarray(data["target_scaling"]).ravel()[:2].tolist()
        except (KeyError, ValueError, TypeError) as error:
            raise ModelArtifactError(f"ANN ensemble: missing or bad array: {error}") from error
        arrays = weights + biases + [fill, mean, scale, log_columns]
        if any(a.dtype.kind not in "fiu" for a in arrays):
            raise ModelArtifactError("ANN ensemble: non-numeric arrays")
        n_inputs = fill.size
        members = weights[0].shape[0] if weights[0].ndim == 3 else 0
        fan_in = n_inputs
        consistent = members > 0 and all(a.ndim == 1 and a.size == n_inputs for a in (fill, mean, scale, log_columns))
        for w, b in zip(weights, biases):
            consistent = consistent and w.ndim == 3 and w.shape[:2] == (members, fan_in) \
                and b.shape == (members, w.shape[2])
            fan_in = w.shape[2] if w.ndim == 3 else -1
        consistent = consistent and fan_in == 1
        if not consistent:
            raise ModelArtifactError("ANN ensemble: inconsistent array shapes")
        if (not all(np.all(np.isfinite(a)) for a in arrays) or not np.all(scale > 0)
                or not (np.isfinite(y_mean) and np.isfinite(y_scale) and y_scale > 0)):
            raise ModelArtifactError("ANN ensemble: non-finite weights or scaling")
        return cls(weights, biases, activation, fill, log_columns.astype(bool), mean, scale, target, y_mean, y_scale)
