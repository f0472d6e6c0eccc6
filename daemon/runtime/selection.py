"""Model selection by cross-validation on the site's own runs (folds of configurations)."""
from __future__ import annotations

import numpy as np

from .conformal import group_folds
from .dataset import RunTable
from .metrics import mape
from .model import RuntimeModel

CANDIDATES = {
    "extra-trees": {"calibration_folds": 0},
    "ann": {"n_members": 5},
    "linear": {"calibration_folds": 0},
}


def cross_validated_mape(table: RunTable, rows: np.ndarray, learner: str, params: dict, *,
                         inputs: list[str] | None = None, folds: int = 5, seed: int = 0) -> float:
    groups = table.groups[rows]
    n_folds = min(folds, np.unique(groups).size)
    if n_folds < 2:
        return float("nan")
    errors = []
    for held_out in group_folds(groups, n_folds, seed):
        model = RuntimeModel(learner, dict(params, random_state=seed), inputs).fit(table, rows[~held_out])
        test = rows[held_out]
        errors.append(mape(table.y[test], model.predict([table.rows[i] for i in test])))
    return float(np.mean(errors))


def select_learner(table: RunTable, rows: np.ndarray, *, inputs: list[str] | None = None,
                   candidates: dict[str, dict] | None = None, folds: int = 5, seed: int = 0) -> tuple[str, dict]:
    """The candidate learner with the lowest cross-validated MAPE, and every candidate's score."""
    candidates = CANDIDATES if candidates is None else candidates
    scores = {name: cross_validated_mape(table, rows, name, params, inputs=inputs, folds=folds, seed=seed)
              for name, params in candidates.items()}
    finite = {name: score for name, score in scores.items() if np.isfinite(score)}
    best = min(finite, key=finite.get) if finite else next(iter(candidates))  # too few configurations
    return best, scores
