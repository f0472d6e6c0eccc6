"""Active learning of seed 003: which runs to do next.

Every candidate configuration is predicted by every member of an ANN ensemble; candidates
are ranked by the coefficient of variation (std / mean) of the members' runtimes, and picked
greedily from the least confident, skipping any closer than ``min_distance`` (in standardised
input space) to a run already done or already picked; when too few qualify, the distance is
halved until ``k`` are found.

>>> import numpy as np
>>> cov = np.array([0.1, 0.5, 0.45, 0.3]); X = np.array([[0.0], [1.0], [1.05], [3.0]])
>>> pick_diverse(cov, X, done=np.empty((0, 1)), k=2, min_distance=0.5)
[1, 3]
"""
from __future__ import annotations

import numpy as np


def pick_diverse(cov: np.ndarray, X: np.ndarray, *, done: np.ndarray, k: int, min_distance: float) -> list[int]:
    """Indices of ``k`` candidates: highest CoV first, at least ``min_distance`` apart."""
    order = np.argsort(-np.asarray(cov), kind="stable")
    k = min(k, len(order))
    distance = float(min_distance)
    while True:
        picked: list[int] = []
        anchors = [row for row in np.asarray(done)]
        for index in order:
            if len(picked) == k:
                break
            point = X[index]
            if anchors and np.min(np.linalg.norm(np.asarray(anchors) - point, axis=1)) < distance:
                continue
            picked.append(int(index))
            anchors.append(point)
        if len(picked) == k or distance < 1e-9:
            if len(picked) < k:  # identical points everywhere: fill by CoV order
                picked += [int(i) for i in order if int(i) not in picked][:k - len(picked)]
            return picked
        distance /= 2


def suggest_runs(X_candidates: np.ndarray, X_done: np.ndarray, y_done: np.ndarray, *, k: int = 5,
                 min_distance: float = 0.5, groups: np.ndarray | None = None, n_members: int = 10,
                 random_state: int | None = 0, model=None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Candidate indices to run next, every candidate's CoV and predicted runtime.

    ``model``: a fitted ensemble with ``coefficient_of_variation`` (default: ANN k-fold
    ensemble fitted here on the runs done).
    """
    from .ann import ANNEnsemble

    X_candidates = np.asarray(X_candidates, dtype=float)
    X_done = np.asarray(X_done, dtype=float)
    if model is None:
        model = ANNEnsemble(n_members=n_members, random_state=random_state).fit(X_done, y_done, groups=groups)
    cov = model.coefficient_of_variation(X_candidates)
    # Distances in the space the nets see (log-scaled, standardised inputs).
    Z_candidates, Z_done = model.standardised_inputs(X_candidates), model.standardised_inputs(X_done)
    picked = pick_diverse(cov, Z_candidates, done=Z_done, k=k, min_distance=min_distance)
    return picked, cov, model.predict(X_candidates)
