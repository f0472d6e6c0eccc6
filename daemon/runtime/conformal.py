"""Split/cross-conformal calibration of normalised residual scores, and configuration folds.

A model gives a centre m and a scale s per row (log-runtime space); the score of a held-out
run is |log y − m| / s. With n scores, the interval m ± q·s where q is the ⌈(n+1)c⌉-th
smallest score covers a new run with probability ≥ c (exchangeability).

Expected coverage. If the n scores and the new run's score are exchangeable (and untied), the
new score is at most the k-th smallest of the n with probability exactly k/(n+1), so the
interval covers with probability ⌈(n+1)c⌉/(n+1), in [c, c + 1/(n+1)): the finite-sample rule
is conservative by less than one run in n + 1 (at 50 % training on the real sweeps, n = 190-300
held-out runs: 80.0-80.5 % for c = 80 %). The learners' scores are cross-conformal: each comes
from a fold model that did not see the run's configuration and trained on the other folds,
while the served model trains on all of them. A fold model is a little worse than the served
one, so its scores are a little larger and the interval a little wider: coverage at or
slightly above c, the more so with fewer folds (the learners use 20). The runs of one
configuration share its error, so the exchangeable units are configurations: the coverage
measured on one split of ~100 held-out configurations strays from c by a few points (the
runtime benchmark records each split's).

>>> import numpy as np
>>> conformal_multiplier(np.arange(1, 10, dtype=float), 0.8)
8.0
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np


def conformal_multiplier(scores: np.ndarray, coverage: float) -> float:
    """Multiplier q of the scale for nominal ``coverage`` (normal quantile without scores)."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1): {coverage}")
    scores = np.sort(np.asarray(scores, dtype=float))
    n = scores.size
    if n == 0:
        # the upper tail's quantile by symmetry: 0.5 + coverage / 2 rounds to 1 (no quantile)
        # for a coverage within 2**-53 of 1, while 1 - coverage is exact there
        return -NormalDist().inv_cdf((1 - coverage) / 2)
    rank = math.ceil((n + 1) * coverage)
    return float(scores[min(rank, n) - 1])


def group_folds(groups: np.ndarray, n_folds: int, random_state: int | None) -> list[np.ndarray]:
    """Row masks of ``n_folds`` folds; all rows of one configuration (group) share a fold."""
    unique = np.unique(groups)
    rng = np.random.default_rng(random_state)
    order = rng.permutation(unique)
    fold_of = {g: i % n_folds for i, g in enumerate(order)}
    assignment = np.array([fold_of[g] for g in groups])
    return [assignment == k for k in range(n_folds)]


def trainable_folds(groups: np.ndarray, n_folds: int, random_state: int | None, min_train: int = 2) -> list[np.ndarray]:
    """The :func:`group_folds` whose complement (the runs a fold's model trains on) has at
    least ``min_train`` runs: with few configurations of few repetitions, a fold can leave one."""
    return [held_out for held_out in group_folds(groups, n_folds, random_state)
            if (~held_out).sum() >= min_train]
