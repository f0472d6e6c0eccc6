"""Active learning of seed 003: which runs to do next.

Every candidate configuration is predicted by every member of an ANN ensemble; candidates
are ranked by the coefficient of variation (std / mean) of the members' runtimes, and picked
greedily from the least confident, skipping any closer than ``min_distance`` (in standardised
input space) to a run already done or already picked; when too few qualify, the distance is
halved until ``k`` are found.

``density=True`` ranks by CoV × the candidate's density among the candidates (information
density): plain CoV sends every pick to the corners of a many-input space, where the members
merely extrapolate; on the real LAMMPS runs (8 inputs) that made active learning need 20–30 %
*more* runs than random picks, density weighting brings it level (benchmarks/README.md).

>>> import numpy as np
>>> cov = np.array([0.1, 0.5, 0.45, 0.3]); X = np.array([[0.0], [1.0], [1.05], [3.0]])
>>> pick_diverse(cov, X, done=np.empty((0, 1)), k=2, min_distance=0.5)
[1, 3]
"""
from __future__ import annotations

import numpy as np

from .ann import ANNEnsemble


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


def candidate_density(Z: np.ndarray, *, max_reference: int = 2000, chunk: int = 1000, seed: int = 0) -> np.ndarray:
    """Mean Gaussian-kernel similarity of each row to the others (bandwidth: median distance).

    Against at most ``max_reference`` rows (a random subset), in chunks: bounded time and
    memory for grids of up to 200 000 candidates.
    """
    Z = np.asarray(Z, dtype=float)
    if len(Z) < 2:
        return np.ones(len(Z))
    reference = Z if len(Z) <= max_reference else Z[np.random.default_rng(seed).choice(len(Z), max_reference,
                                                                                          replace=False)]
    sample = reference[:200]
    gaps = np.linalg.norm(sample[:, None, :] - reference[None, :, :], axis=2)
    bandwidth = float(np.median(gaps[gaps > 0])) if np.any(gaps > 0) else 1.0
    density = np.empty(len(Z))
    for start in range(0, len(Z), chunk):
        block = np.linalg.norm(Z[start:start + chunk, None, :] - reference[None, :, :], axis=2)
        density[start:start + chunk] = np.exp(-0.5 * (block / bandwidth) ** 2).mean(axis=1)
    return density


def suggest_runs(X_candidates: np.ndarray, X_done: np.ndarray, y_done: np.ndarray, *, k: int = 5,
                 min_distance: float = 0.5, groups: np.ndarray | None = None, n_members: int = 10,
                 random_state: int | None = 0, model=None,
                 density: bool = False) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Candidate indices to run next, every candidate's CoV and predicted runtime.

    ``model``: a fitted ensemble with ``coefficient_of_variation`` (default: ANN k-fold
    ensemble fitted here on the runs done).
    """
    X_candidates = np.asarray(X_candidates, dtype=float)
    X_done = np.asarray(X_done, dtype=float)
    if model is None:
        model = ANNEnsemble(n_members=n_members, random_state=random_state).fit(X_done, y_done, groups=groups)
    cov = model.coefficient_of_variation(X_candidates)
    # Distances in the space the nets see (log-scaled, standardised inputs).
    Z_candidates, Z_done = model.standardised_inputs(X_candidates), model.standardised_inputs(X_done)
    score = cov * candidate_density(Z_candidates) if density else cov
    picked = pick_diverse(score, Z_candidates, done=Z_done, k=k, min_distance=min_distance)
    return picked, cov, model.predict(X_candidates)
