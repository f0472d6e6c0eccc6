"""Train and publish the runtime models of one application from its run table.

Writes the ``inputs`` variant (job-script inputs only: usable at submission) and, when some
runtime features arrive early enough (time reduction), the ``runtime`` variant (inputs +
those features: used after ``ReportRuntimeFeatures``). For each variant the learner is chosen
by cross-validation on the site's own runs (:mod:`.selection`: folds of configurations; the
blend unless the simplest learner that no richer one beats clearly also beats the blend
clearly) among the learners the daemon can serve
(log-linear, start-up + steps, Gaussian process, extra-trees, boosted trees, ANN ensemble, and the blend
of log-linear, boosted trees and ANN). :func:`fit_served` is that choice and
fit; ``hpcpredict evaluate runtime`` scores the same function. Each artifact's metadata records
the data file, its SHA-256, the learner chosen and why, every candidate's cross-validated MAPE,
the repetition noise of the runs and the features kept.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> csv = folder / "runs.csv"
>>> _ = csv.write_text("n,it,it@t,t\\n" + "\\n".join(f"{n},{n % 7 + 1},0.01,{n * (n % 7 + 1)}" for n in range(1, 60)))
>>> summary = train_application(csv, target="t", application="demo", directory=folder / "models",
...                             learners={"extra-trees": {"n_estimators": 20},
...                                       "ann": {"n_members": 3, "max_epochs": 30}})
>>> sorted(summary)
['inputs', 'runtime']
>>> summary["runtime"]["learner"] in ("extra-trees", "ann"), sorted(summary["runtime"]["cv_mape_by_learner"])
(True, ['ann', 'extra-trees'])
>>> summary["runtime"]["selection"]["simple_model_served"] == (summary["runtime"]["learner"] == "extra-trees")
True
"""
from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from ...runtime.artifacts import SERVABLE
from ...runtime.derived import DerivedInputs
from .accuracy import repetition_disagreement
from .dataset import RunTable, read_runs_csv
from .model import RuntimeModel
from .packing import save_application_model
from .reduction import DEFAULT_TIME_SHARE, usable_inputs
from .selection import CANDIDATES, REPEATS, select_learner, selection_report


DEFAULT_LEARNERS = CANDIDATES
SELECTION_FOLDS = 5


def fit_served(table: RunTable, rows: np.ndarray, *, inputs: list[str] | None,
               learners: Mapping[str, dict] | None = None, seed: int = 0,
               cross_validate_single: bool = True) -> tuple[RuntimeModel, dict]:
    """The model ``train-runtime`` serves from these runs, and how it was chosen.

    ``learners``: the candidates, simplest first (default :data:`~.selection.CANDIDATES`);
    with one candidate there is no choice (its CV score is still recorded).
    Returns (fitted model, {"learner", "cv_mape_by_learner", "selection"}).
    ``cross_validate_single=False`` skips cross-validation when there is one candidate.
    """
    learners = dict(DEFAULT_LEARNERS if learners is None else learners)
    unknown = sorted(set(learners) - set(SERVABLE))
    if unknown or not learners:
        raise ValueError(f"learners must be among {', '.join(SERVABLE)}: {', '.join(unknown) or 'none given'}")
    fitted = {name: dict(params, random_state=params.get("random_state", seed)) for name, params in learners.items()}
    if len(fitted) == 1 and not cross_validate_single:
        chosen, scores = next(iter(fitted)), {name: float("nan") for name in fitted}
    else:
        # One candidate: its score is only recorded, one fold assignment is enough.
        chosen, scores = select_learner(table, rows, inputs=inputs, folds=SELECTION_FOLDS, seed=seed, candidates=fitted,
                                        repeats=REPEATS if len(fitted) > 1 else 1)
    model = RuntimeModel(chosen, fitted[chosen], inputs).fit(table, rows)
    noise = repetition_disagreement(table.groups[rows], table.y[rows])
    return model, {"learner": chosen, "cv_mape_by_learner": scores,
                   "selection": selection_report(chosen, scores, noise)}


def train_application(data: Path, *, target: str, application: str, directory: Path,
                      time_share: float = DEFAULT_TIME_SHARE, learners: Mapping[str, dict] | None = None,
                      input_aliases: dict[str, str] | None = None, version: str = "",
                      seed: int = 0, derived: DerivedInputs | None = None) -> dict[str, dict]:
    """Fit and save the application's variants; returns each variant's metadata.

    ``learners``: the candidates and their parameters, simplest first (default: every servable
    learner with default parameters); with one candidate there is no choice, its CV score is recorded.
    ``derived``: inputs computed from the others (:mod:`.derived`), stored with the model.
    """
    table = read_runs_csv(Path(data), target=target, derived=derived)
    rows = np.arange(len(table.y))
    digest = hashlib.sha256(Path(data).read_bytes()).hexdigest()
    static_inputs, _, _ = usable_inputs(table, rows, time_share=None)
    all_inputs, kept_features, dropped = usable_inputs(table, rows, time_share=time_share)
    variants = {"inputs": static_inputs}
    if kept_features:
        variants["runtime"] = all_inputs
    summary = {}
    for variant, inputs in variants.items():
        model, choice = fit_served(table, rows, inputs=inputs, learners=learners, seed=seed)
        chosen = choice["learner"]
        scores = {name: (round(v, 6) if math.isfinite(v) else None) for name, v in choice["cv_mape_by_learner"].items()}
        metadata = {
            "variant": variant, "version": version or digest[:12], "data": str(data), "data_sha256": digest,
            "target": target, "n_runs": int(len(table.y)), "learner": chosen,
            "cv_mape": scores[chosen], "cv_mape_by_learner": scores, "cv_folds": SELECTION_FOLDS,
            "selection": choice["selection"],
            "kept_features": model.kept_features, "required_inputs": model.required_inputs,
            "runtime_features_dropped": dropped, "input_aliases": dict(input_aliases or {}),
            "derived_inputs": derived.to_json() if derived else [],
        }
        save_application_model(model, Path(directory), application=application, metadata=metadata)
        summary[variant] = metadata
    return summary
