"""Accuracy metrics of runtime models (seeds 000 and 003): all pure numpy.

>>> import numpy as np
>>> mape(np.array([1.0, 2.0]), np.array([1.1, 1.8]))
0.1
>>> rank_accuracy(np.array([1.0, 2.0, 3.0]), np.array([1.0, 3.0, 2.0]))
0.6666666666666666
"""
from __future__ import annotations

import numpy as np


def mape(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean absolute percentage error as a fraction: mean |ŷ − y| / y."""
    y_true = np.asarray(y_true, dtype=float)
    return float(np.round(np.mean(np.abs(np.asarray(y_pred) - y_true) / y_true), 12))


def rank_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Share of pairs with different true values that the prediction orders the same way."""
    y_true = np.asarray(y_true, dtype=float)
    y_pred = np.asarray(y_pred, dtype=float)
    i, j = np.triu_indices(len(y_true), k=1)
    true_sign = np.sign(y_true[i] - y_true[j])
    mask = true_sign != 0
    if not mask.any():
        return float("nan")
    return float(np.mean(np.sign(y_pred[i] - y_pred[j])[mask] == true_sign[mask]))


def coverage(y_true: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    """Share of true values inside [low, high]."""
    y_true = np.asarray(y_true, dtype=float)
    return float(np.mean((y_true >= low) & (y_true <= high)))


def relative_width(y_pred: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    """Mean interval width relative to the point prediction."""
    return float(np.mean((np.asarray(high) - np.asarray(low)) / np.asarray(y_pred)))


def configuration_means(groups: np.ndarray, y: np.ndarray, predicted: np.ndarray):
    """(mean runtime, prediction) per configuration, or None without repetitions."""
    unique, index = np.unique(groups, return_inverse=True)
    if unique.size == groups.size:
        return None
    counts = np.bincount(index)
    return np.bincount(index, weights=y) / counts, np.bincount(index, weights=predicted) / counts


def repetition_disagreement(groups: np.ndarray, y: np.ndarray) -> float | None:
    """MAPE of predicting each run by the mean of its configuration's *other* repetitions.

    How much repetitions of the same inputs disagree (measurement noise); a model of the
    inputs alone cannot be expected to do much better.
    """
    unique, index = np.unique(groups, return_inverse=True)
    counts = np.bincount(index)
    sums = np.bincount(index, weights=y)
    repeated = counts[index] > 1
    if not repeated.any():
        return None
    others = (sums[index] - y)[repeated] / (counts[index][repeated] - 1)
    return mape(y[repeated], others)
