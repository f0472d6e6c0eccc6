"""Synthetic PMNF measurements (seed 001): classifier training data and the benchmark protocol.

Functions are ``c0 + c1 * x**i * log2(x)**j`` with coefficients uniform in [0.001, 1000];
noise level ``n`` means multiplicative uniform noise of +-n/2 on each repetition; the modeler
sees the median of the repetitions (domain adaptation for a task fitted on means: the mean).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = random_sequence(rng, 5)
>>> len(x), bool(np.all(np.diff(x) > 0))
(5, True)
"""
from __future__ import annotations

import numpy as np

from .pmnf import CLASSES, factor

# Parameter-value series of the kind seed 001 draws from, continued for extrapolation points.
SEQUENCE_KINDS = ("doubling", "linear", "small-linear", "small-exponential", "uniform")


def sequence(kind: str, start: float, step: float, length: int) -> np.ndarray:
    """A parameter-value sequence; ``step`` is the ratio for exponential kinds."""
    k = np.arange(length, dtype=float)
    if kind in ("doubling", "small-exponential"):
        return start * step ** k
    return start + step * k


def random_sequence_spec(rng: np.random.Generator) -> tuple[str, float, float]:
    kind = SEQUENCE_KINDS[rng.integers(len(SEQUENCE_KINDS))]
    if kind == "doubling":
        return kind, float(2 ** rng.integers(0, 7)), 2.0
    if kind == "small-exponential":
        return kind, float(2 ** rng.integers(0, 4)), float(rng.choice([4.0, 8.0]))
    if kind == "linear":
        step = float(rng.choice([10, 16, 20, 32, 50, 64, 100, 128, 1000]))
        return kind, step, step
    if kind == "small-linear":
        step = float(rng.integers(1, 5))
        return kind, float(rng.integers(1, 5)) * step, step
    start = float(rng.integers(1, 50))
    return kind, start, float(rng.integers(5, 60))


def random_sequence(rng: np.random.Generator, length: int) -> np.ndarray:
    kind, start, step = random_sequence_spec(rng)
    if kind == "uniform":  # irregular but increasing spacing
        gaps = rng.uniform(0.3, 1.7, size=length - 1) * step
        return np.concatenate([[start], start + np.cumsum(gaps)])
    return sequence(kind, start, step, length)


def noisy_medians(rng: np.random.Generator, clean: np.ndarray, noise: float,
                  repetitions: int, location: str = "median") -> np.ndarray:
    """Median (``location="mean"``: mean) over repetitions of clean * (1 + U(-n/2, n/2)) for a
    1-d array of clean values."""
    draws = clean * (1 + rng.uniform(-0.5, 0.5, size=(repetitions,) + np.shape(clean)) * noise)
    return np.mean(draws, axis=0) if location == "mean" else np.median(draws, axis=0)


def class_training_set(rng: np.random.Generator, samples_per_class: int, *, positions: np.ndarray | None = None,
                       noise_range: tuple[float, float] = (0.0, 1.0), repetitions: int | None = None,
                       lengths: tuple[int, int] = (5, 8), location: str = "median",
                       ) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray]:
    """Labelled synthetic lines: (x per sample, median values per sample, noise, class labels);
    ``location="mean"`` gives the mean of the repetitions instead of the median.

    With ``positions`` given (domain adaptation) every sample uses those parameter values;
    otherwise each sample gets a random sequence of random length.
    """
    n_classes = len(CLASSES)
    labels = np.repeat(np.arange(n_classes), samples_per_class)
    rng.shuffle(labels)
    count = len(labels)
    c0 = rng.uniform(0.001, 1000, count)
    c1 = rng.uniform(0.001, 1000, count)
    noise = rng.uniform(noise_range[0], noise_range[1], count)
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for k in range(count):
        x = positions if positions is not None else random_sequence(rng, int(rng.integers(lengths[0], lengths[1] + 1)))
        reps = repetitions if repetitions is not None else int(rng.integers(1, 6))
        clean = c0[k] + c1[k] * factor(x, CLASSES[labels[k]])
        xs.append(np.asarray(x, dtype=float))
        ys.append(noisy_medians(rng, clean, noise[k], reps, location))
    return xs, ys, noise, labels
