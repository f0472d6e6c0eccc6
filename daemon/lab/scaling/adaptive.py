"""Noise-resilient adaptive modeler (seed 001): a classifier proposes exponents.

Steps, as in the paper: estimate noise (rrd); turn each parameter's line of measurements into
a fixed-size feature vector; a feed-forward classifier (scikit-learn ``MLPClassifier``,
pretrained on synthetic noisy PMNF lines) is *domain-adapted* by further training on synthetic
lines shaped like the task (same parameter values, repetitions and noise range); its top 3
exponent classes per parameter (plus the regression modeler's winner when the noise is low)
become hypotheses, combined across parameters and chosen by cross-validated SMAPE.

At high noise the paper switches the regression modeler off and notes that then "the DNN
output already represents the best model". We follow that: when a parameter's line is noisier
than ``CLASSIFIER_ONLY_ABOVE`` (a line averaged over a grid of other-parameter values:
``GRID_CLASSIFIER_ONLY_ABOVE``) its exponent comes from the adapted classifier alone (CV SMAPE
among the top 3 on 5 noisy points picks the hypothesis that fits the noise best) — the class
at the median of the classifier's probabilities ordered by growth (``NOISY_LINE_QUANTILE``),
with a positive coefficient; multi-parameter combinations need a clearly lower CV SMAPE
(``COMBINE_MARGIN_NOISY``) to add terms, so near-ties go to the simpler model.

Differences from the paper, on purpose: noisy data (rrd above ``MEAN_ABOVE``) whose pooled noise
looks light-tailed are modelled on the *mean* of each point's repetitions, a less variable
estimate than the median there; outlier-laden or strongly skewed repetitions keep the median
(:func:`location_for`). A smaller network (3 hidden layers, not 5 of up to
1500 neurons) so the shipped weights stay small and adaptation takes a second on a laptop
CPU; features are values and positions on a log scale (see :func:`line_features`); by default
300 samples per class and 2 passes for adaptation (paper: 2000 and 1).

The pretrained weights are plain arrays in ``adaptive_pretrained.npz`` (no pickle), made by
``hpcpredict scaling pretrain`` (see :func:`pretrain`).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ...errors import ModelArtifactError
from .abstract_modeler import FittedModel, Modeler
from .measurements import (
    MeasurementSet, deviation_skewness, location_variance_ratio, relative_deviation_range)
from .pmnf import CLASSES, ExponentPair
from .regression import (
    combine_for_noise, parameter_line, prefer_two_terms, rank_single_parameter)
from .synthetic import class_training_set

logger = logging.getLogger(__name__)

PRETRAINED_PATH = Path(__file__).with_name("adaptive_pretrained.npz")
SLOTS = 11                   # at most 11 values per parameter (paper: inputs for 5..11 points)
HIDDEN = (256, 128, 64)
LOW_NOISE = 0.20             # at or below this rrd the regression winner is a candidate too
TOP_K = 3
# Above this noise level of a parameter's line the adapted classifier's top class is taken as
# is: with 5 noisy points, CV SMAPE among the top 3 mostly picks the hypothesis that fits the
# noise (measured on a development seed, see benchmarks/README.md "Scaling models").
CLASSIFIER_ONLY_ABOVE = 0.15
# The same for a line averaged over a grid of other-parameter values (two or more parameters):
# there the top-3 candidates are not judged on the line's 5 points but by the combination's CV
# SMAPE over all 5^m points, which picks better than the classifier alone up to a noisier line
# (round 4, dev seeds 101/102; benchmarks/README.md "Scaling models").
GRID_CLASSIFIER_ONLY_ABOVE = 0.30
# With noisy data (global rrd above the same level) a multi-parameter hypothesis with more
# terms must lower the CV SMAPE by more than this fraction to win (regression modeler: 0.1 %).
COMBINE_MARGIN_NOISY = 0.10
# Noisy lines: read the adapted classifier's probabilities as a distribution over growth
# rates and take the class at this quantile of it (classes ordered by growth beyond the largest
# measured value; only classes with a positive coefficient on the line count). None = the most
# probable class. 0.5 is the posterior median: the class minimising the expected |error of the
# log-growth|. Lower values (leaning to slower growth) extrapolated worse on the dev seeds.
NOISY_LINE_QUANTILE: float | None = 0.5
# Location estimate of a point's repetitions (round 6; seed 001 uses the median). Above this
# rrd the mean is fitted instead when, by a bootstrap of the pooled relative deviations, its
# variance is at most MEAN_VARIANCE_RATIO of the median's (uniform noise ~0.55, normal ~0.7;
# outliers or heavy right tails > 1 keep the median). Multiplicative noise of one shape at
# every point scales the mean and the median alike, so the choice changes the variance of the
# fitted values, not the shape being fitted. None = always the median. Chosen on dev seeds
# (benchmarks/README.md "Scaling models", round 6): the mean cut the extrapolation error ratio
# to Extra-P by about a third at every noise level 2-100 %, so any noisy data qualify (0.0);
# 0.15 (mean from 20 % noise up) was the first candidate.
MEAN_ABOVE: float | None = 0.0
MEAN_VARIANCE_RATIO = 0.75
# ... and only if the pooled deviations are roughly symmetric (|skewness| at most this): for
# right-skewed timing noise the mean chases the slow runs (uniform noise, 25 pooled values:
# |skewness| > 0.5 in ~16 % of tasks; log-normal(0, 0.5): ~60-100 %).
MEAN_MAX_SKEW = 0.5
# Domain adaptation simulates the same location estimate as the one fitted.
ADAPT_ON_LOCATION = True
NOISE_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0)


def line_features(x: np.ndarray, y: np.ndarray, noise: float) -> np.ndarray:
    """Fixed-size features of one line (5..11 points, sorted by x).

    Per slot: value / max value, (value - min) / range, position log2(x)/log2(max x) and
    x / max x, then a mask; the noise estimate last. Unused slots are 0.
    """
    n = min(len(x), SLOTS)
    x = np.asarray(x[:n], dtype=float)
    y = np.asarray(y[:n], dtype=float)
    out = np.zeros(5 * SLOTS + 1)
    peak = np.max(np.abs(y)) or 1.0
    spread = (y.max() - y.min()) or 1.0
    log_top = np.log2(x[-1]) if x[-1] > 1 else 1.0
    out[0:n] = y / peak
    out[SLOTS:SLOTS + n] = (y - y.min()) / spread
    out[2 * SLOTS:2 * SLOTS + n] = np.log2(np.maximum(x, 1e-12)) / log_top
    out[3 * SLOTS:3 * SLOTS + n] = x / x[-1]
    out[4 * SLOTS:4 * SLOTS + n] = 1.0
    out[-1] = min(noise, 2.0)
    return out


def features_of(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], noise: Sequence[float] | np.ndarray) -> np.ndarray:
    return np.stack([line_features(x, y, n) for x, y, n in zip(xs, ys, noise)])


@dataclass(frozen=True)
class ClassifierWeights:
    """Dense tanh layers + softmax output, as plain arrays."""

    coefs: tuple[np.ndarray, ...]
    intercepts: tuple[np.ndarray, ...]

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        hidden = features
        for w, b in zip(self.coefs[:-1], self.intercepts[:-1]):
            hidden = np.tanh(hidden @ w + b)
        logits = hidden @ self.coefs[-1] + self.intercepts[-1]
        logits -= logits.max(axis=1, keepdims=True)
        expd = np.exp(logits)
        return expd / expd.sum(axis=1, keepdims=True)

    def save(self, path: Path, meta: dict) -> None:
        arrays = {f"coef_{k}": c.astype(np.float32) for k, c in enumerate(self.coefs)}
        arrays.update({f"intercept_{k}": b.astype(np.float32) for k, b in enumerate(self.intercepts)})
        arrays["meta"] = np.array(json.dumps(meta))
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(tmp, allow_pickle=False, **arrays)
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "ClassifierWeights":
        try:
            with np.load(path, allow_pickle=False) as data:
                layers = sum(1 for key in data.files if key.startswith("coef_"))
                coefs = tuple(data[f"coef_{k}"].astype(float) for k in range(layers))
                intercepts = tuple(data[f"intercept_{k}"].astype(float) for k in range(layers))
        except (OSError, ValueError, KeyError) as error:
            raise ModelArtifactError(f"{path}: cannot load classifier weights: {error}") from error
        if layers == 0 or coefs[0].shape[0] != 5 * SLOTS + 1 or coefs[-1].shape[1] != len(CLASSES):
            raise ModelArtifactError(f"{path}: classifier weights have the wrong shape")
        return cls(coefs, intercepts)

    @classmethod
    def from_estimator(cls, estimator) -> "ClassifierWeights":
        return cls(tuple(np.array(c) for c in estimator.coefs_), tuple(np.array(b) for b in estimator.intercepts_))


def _estimator(random_state):
    from sklearn.neural_network import MLPClassifier

    return MLPClassifier(hidden_layer_sizes=HIDDEN, activation="tanh", solver="adam",
                         learning_rate_init=1e-3, batch_size=256, random_state=random_state)


def pretrain(samples_per_class: int = 2000, epochs: int = 40, seed: int = 0) -> tuple[ClassifierWeights, dict]:
    """Train the generic classifier on synthetic lines of random shape, noise 0-100 %."""
    rng = np.random.default_rng(seed)
    xs, ys, noise, labels = class_training_set(rng, samples_per_class, lengths=(5, 11))
    estimator = _estimator(seed).set_params(max_iter=epochs, n_iter_no_change=epochs, tol=0.0)
    import warnings
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        estimator.fit(features_of(xs, ys, noise), labels)
    meta = {"samples_per_class": samples_per_class, "epochs": epochs, "seed": seed,
            "hidden": list(HIDDEN), "classes": [list(c) for c in CLASSES],
            "train_accuracy": float(estimator.score(features_of(xs, ys, noise), labels))}
    return ClassifierWeights.from_estimator(estimator), meta


def domain_adapt(weights: ClassifierWeights, positions: np.ndarray, noise_range: tuple[float, float],
                 repetitions: int, *, samples_per_class: int = 300, epochs: int = 2,
                 seed: int = 0, location: str = "median") -> ClassifierWeights:
    """Continue training the pretrained weights on synthetic lines shaped like the task
    (``location``: the estimate of the repetitions the task is fitted on)."""
    rng = np.random.default_rng(seed)
    xs, ys, noise, labels = class_training_set(rng, samples_per_class, positions=positions,
                                               noise_range=noise_range, repetitions=repetitions,
                                               location=location)
    features = features_of(xs, ys, noise)
    estimator = _estimator(seed)
    # partial_fit once to size the network, then start from the pretrained weights.
    estimator.set_params(batch_size=1).partial_fit(features[:1], labels[:1], classes=np.arange(len(CLASSES)))
    estimator.set_params(batch_size=min(256, len(features)))
    estimator.coefs_ = [c.copy() for c in weights.coefs]
    estimator.intercepts_ = [b.copy() for b in weights.intercepts]
    for _ in range(epochs):
        estimator.partial_fit(features, labels)
    return ClassifierWeights.from_estimator(estimator)


def location_for(data: MeasurementSet, noise: float) -> str:
    """"mean" when the data are noisy (rrd above :data:`MEAN_ABOVE`) and the pooled noise is
    roughly symmetric and makes the mean of the repetitions clearly less variable than their
    median; else "median"."""
    if MEAN_ABOVE is None or noise <= MEAN_ABOVE:
        return "median"
    if abs(deviation_skewness(data.points)) > MEAN_MAX_SKEW:
        return "median"
    return "mean" if location_variance_ratio(data.points) <= MEAN_VARIANCE_RATIO else "median"


def growth_quantile_class(x: np.ndarray, probabilities: np.ndarray, allowed: set[ExponentPair] | None,
                          quantile: float) -> ExponentPair:
    """The class at ``quantile`` of the classifier's distribution, classes ordered by growth.

    Growth is ``log(f(2 x_max) / f(x_max))`` for ``f = x^i log2(x)^j`` (the next doubling
    past the data, which is what an extrapolation sees); ``allowed`` restricts the classes
    (probabilities renormalised), falling back to all classes if none is allowed.

    >>> p = np.zeros(len(CLASSES)); p[CLASSES.index((1.0, 0))] = 0.45; p[CLASSES.index((2.0, 0))] = 0.55
    >>> growth_quantile_class(np.array([4., 8, 16, 32, 64]), p, None, 0.5)
    (2.0, 0)
    >>> growth_quantile_class(np.array([4., 8, 16, 32, 64]), p, None, 0.4)
    (1.0, 0)
    """
    top = float(np.max(x))
    top = top if top > 1.0 else 2.0
    growth = np.array([i * np.log(2.0) + j * np.log(np.log2(2 * top) / np.log2(top)) for i, j in CLASSES])
    mask = np.array([allowed is None or c in allowed for c in CLASSES])
    weights = np.where(mask, probabilities, 0.0) if mask.any() else np.asarray(probabilities, dtype=float)
    order = np.lexsort((-weights, growth))        # slowest growth first; ties: more probable first
    cumulative = np.cumsum(weights[order]) / max(float(weights.sum()), 1e-300)
    k = int(np.searchsorted(cumulative, quantile - 1e-12))
    return CLASSES[int(order[min(k, len(order) - 1)])]


class AdaptiveModeler(Modeler):
    """Noise-resilient modeler: a domain-adapted classifier proposes the exponents.

    Caches adapted weights per task shape (positions, repetitions, noise)."""

    NAME = "adaptive"
    OPTIONS = ("samples_per_class", "source")

    def __init__(self, weights: ClassifierWeights | None = None, *, samples_per_class: int = 300,
                 epochs: int = 2, adapt: bool = True, seed: int = 0, source: str = ""):
        self.source = source
        self.weights = weights
        self.samples_per_class = samples_per_class
        self.epochs = epochs
        self.adapt = adapt
        self.seed = seed
        self._adapted: dict[tuple, ClassifierWeights] = {}

    def _weights(self) -> ClassifierWeights:
        if self.weights is None:
            self.weights = ClassifierWeights.load(PRETRAINED_PATH)
        return self.weights

    def adapted(self, positions: np.ndarray, noise_range: tuple[float, float],
                repetitions: int, location: str = "median") -> ClassifierWeights:
        if not self.adapt:
            return self._weights()
        # Coarse noise buckets keep the cache useful across tasks of the same shape.
        grid = NOISE_GRID
        low = max([g for g in grid if g <= noise_range[0]], default=0.0)
        high = min([g for g in grid if g >= noise_range[1] and g > low], default=grid[-1])
        if low > 0:      # do not adapt to a narrower range than the grid step below
            low = max([g for g in grid if g < low], default=0.0)
        location = location if ADAPT_ON_LOCATION else "median"
        key = (tuple(np.round(positions, 9)), float(low), float(high), repetitions, location)
        if key not in self._adapted:
            self._adapted[key] = domain_adapt(self._weights(), np.asarray(positions), (low, high), repetitions,
                                              samples_per_class=self.samples_per_class,
                                              epochs=self.epochs, seed=self.seed, location=location)
        return self._adapted[key]

    def candidates(self, x: np.ndarray, y: np.ndarray, noise: float, noise_range: tuple[float, float],
                   repetitions: int, classifier_only: bool = False,
                   location: str = "median") -> list[ExponentPair]:
        weights = self.adapted(x, noise_range, repetitions, location)
        probabilities = weights.probabilities(line_features(x, y, noise)[None, :])[0]
        top = [CLASSES[k] for k in np.argsort(probabilities)[::-1][:TOP_K]]
        ranked = rank_single_parameter(x, y, pairs=top)
        plausible = {r.pair for r in ranked if np.isfinite(r.cv_smape)}
        every = rank_single_parameter(x, y)
        regression = every[0].pair
        if classifier_only and regression[0] >= 0:
            # Noisy data: the adapted classifier's answer is the model (seed 001: with the
            # regression modeler off, the DNN output is the answer).
            if NOISY_LINE_QUANTILE is not None:
                allowed = {r.pair for r in every if np.isfinite(r.cv_smape)}
                return [growth_quantile_class(x, probabilities, allowed, NOISY_LINE_QUANTILE)]
            return [next((p for p in top if p in plausible), top[0])]
        picked = [r.pair for r in ranked if np.isfinite(r.cv_smape)] or top
        if noise <= LOW_NOISE or regression[0] < 0:   # calm data, or strong scaling (not in E)
            picked.append(regression)
        return list(dict.fromkeys(picked))

    def model(self, measurements: MeasurementSet) -> FittedModel:
        return self.fit(measurements, self.source)

    def fit(self, data: MeasurementSet, source: str = "") -> FittedModel:
        noise = relative_deviation_range(data.points)
        # Adaptation range: the task's rrd and half of it (seed 001 uses the measured range;
        # the per-point spread of 5 repetitions is itself very noisy, so we anchor on rrd).
        low, high = noise / 2, noise
        repetitions = max(1, int(np.median([len(p.values) for p in data.points])))
        location = location_for(data, noise)
        if location != "median":
            data = data.summarised(location)       # parameter lines and fits now see the mean
        choices = {}
        for index, name in enumerate(data.parameters):
            x, y = parameter_line(data, index, source)
            # A line averaged over G other-parameter combinations carries ~1/sqrt(G) of the noise.
            lines = max(1, len(data.points) // len(x))
            shrink = 1.0 / np.sqrt(lines)
            limit = CLASSIFIER_ONLY_ABOVE if lines == 1 else GRID_CLASSIFIER_ONLY_ABOVE
            choices[name] = self.candidates(x, y, noise * shrink, (low * shrink, high * shrink), repetitions,
                                            classifier_only=noise * shrink > limit, location=location)
        margin = COMBINE_MARGIN_NOISY if noise > CLASSIFIER_ONLY_ABOVE else 1e-3
        function, cv = combine_for_noise(data, choices, noise, margin=margin)
        if any(pair[0] < 0 for pair in choices[data.parameters[0]]):   # strong scaling seen
            function, cv = prefer_two_terms(data, function, cv)
        return FittedModel(function, cv, "adaptive", noise, location)
