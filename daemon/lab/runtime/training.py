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
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from ...runtime.artifacts import SERVABLE
from ...runtime.derived import DerivedInputs
from ...errors import HpcPredictError
from .accuracy import repetition_disagreement
from .agreement import Agreement, agreeing_users
from .learners import LearnerNotApplicable
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


POOL_CHOICES = ("agreeing", "all")
MIN_OWN_RUNS = 3   # fewer runs of her own: a user kept out of the pool gets no model of her own


def train_application(data: Path, *, target: str, application: str, directory: Path,
                      time_share: float = DEFAULT_TIME_SHARE, learners: Mapping[str, dict] | None = None,
                      input_aliases: dict[str, str] | None = None, version: str = "",
                      seed: int = 0, derived: DerivedInputs | None = None, pool: str = "agreeing") -> dict[str, dict]:
    """Fit and save the application's variants; returns each variant's metadata.

    ``learners``: the candidates and their parameters, simplest first (default: every servable
    learner with default parameters); with one candidate there is no choice, its CV score is recorded.
    ``derived``: inputs computed from the others (:mod:`.derived`), stored with the model.

    Runs that name their users (a ``_user`` column: ``train-runtime --from-store``) are pooled
    only over the users whose runs agree (:mod:`.agreement`) unless ``pool="all"`` (the admin's
    choice); each user kept out who has :data:`MIN_OWN_RUNS` runs gets a model of her own runs
    (``<application>/users/<user>/``, summary keys ``<user>/<variant>``), which the daemon
    serves for her jobs only. Without users (a run table an admin gave) every run is pooled.
    """
    if pool not in POOL_CHOICES:
        raise ValueError(f"pool must be one of {', '.join(POOL_CHOICES)}: {pool!r}")
    table = read_runs_csv(Path(data), target=target, derived=derived)
    rows = np.arange(len(table.y))
    digest = hashlib.sha256(Path(data).read_bytes()).hexdigest()
    common = {"version": version or digest[:12], "data": str(data), "data_sha256": digest, "target": target,
              "input_aliases": dict(input_aliases or {}), "derived_inputs": derived.to_json() if derived else []}
    fit = _Scope(table=table, directory=Path(directory), application=application, time_share=time_share,
                 learners=learners, seed=seed, common=common)
    if table.users is None:
        return fit.save(rows, user=None, extra={})
    static_inputs, _, _ = usable_inputs(table, rows, time_share=None)
    if pool == "all":
        check = Agreement(pooled=sorted(set(table.users.tolist())))
    else:
        check = agreeing_users(table, rows, inputs=static_inputs)
    summary: dict[str, dict] = {}
    extra = {"pool": pool, "agreement": check.as_json()}
    if check.pooled:
        summary.update(fit.save(rows[np.isin(table.users, check.pooled)], user=None,
                                extra=dict(extra, users=check.pooled)))
    for user in sorted(check.kept_out):
        own = rows[table.users == user]
        if own.size < MIN_OWN_RUNS:
            continue
        try:
            fitted = fit.save(own, user=user, extra=dict(extra, users=[user]))
        except (ValueError, LearnerNotApplicable):
            continue   # her runs cannot be modelled alone: her jobs are answered as anyone's
        summary.update({f"{user}/{variant}": metadata for variant, metadata in fitted.items()})
    if not summary:
        raise HpcPredictError(f"no runtime model of {application}: no two users' runs agree and no user has "
                              f"{MIN_OWN_RUNS} runs of her own ({'; '.join(f'{u}: {why}' for u, why in check.kept_out.items())})")
    return summary


@dataclass(frozen=True)
class _Scope:
    """What every scope's models of one application share: the runs, where they go, how they are fit."""
    table: RunTable
    directory: Path
    application: str
    time_share: float
    learners: Mapping[str, dict] | None
    seed: int
    common: dict

    def save(self, rows: np.ndarray, *, user: str | None, extra: dict) -> dict[str, dict]:
        return _fit_scope(self.table, rows, user=user, directory=self.directory, application=self.application,
                          time_share=self.time_share, learners=self.learners, seed=self.seed, common=self.common,
                          extra=extra)


def _fit_scope(table: RunTable, rows: np.ndarray, *, user: str | None, directory: Path, application: str,
               time_share: float, learners: Mapping[str, dict] | None, seed: int, common: dict,
               extra: dict) -> dict[str, dict]:
    """Fit and save the variants of one scope (the pooled model, or ``user``'s own) on ``rows``."""
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
            "variant": variant, **common, "n_runs": int(rows.size), "learner": chosen,
            "cv_mape": scores[chosen], "cv_mape_by_learner": scores, "cv_folds": SELECTION_FOLDS,
            "selection": choice["selection"],
            "kept_features": model.kept_features, "required_inputs": model.required_inputs,
            "runtime_features_dropped": dropped, **extra,
        }
        save_application_model(model, directory, application=application, metadata=metadata, user=user)
        summary[variant] = metadata
    return summary


# "Not worse": within this share of the serving model's error (and one point of MAPE): the
# cross-validated MAPE of one data set moves by a few % between fold assignments (selection.py).
PUBLISH_MARGIN = 0.10
PUBLISH_SLACK = 0.01


def _scopes(directory: Path, application: str) -> dict[str, Path]:
    """Each model of ``application`` under ``directory``: "<variant>" or "<user>/<variant>" -> JSON path."""
    root = Path(directory) / application
    found = {path.stem: path for path in sorted(root.glob("*.json"))}
    found.update({f"{path.parent.name}/{path.stem}": path for path in sorted(root.glob("users/*/*.json"))})
    return found


def _cv_mape(path: Path) -> float | None:
    try:
        value = json.loads(path.read_text())["metadata"]["cv_mape"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def worse_than_serving(serving: Path | None, candidate: Path, application: str) -> list[str]:
    """Why the models of ``application`` in ``candidate`` must not replace the serving ones
    (in the model directory ``serving``; None: nothing served): for each model (the pooled
    one, a user's own) whose cross-validated MAPE on held-out configurations is worse than the
    serving model of the same scope and variant by more than :data:`PUBLISH_MARGIN` (and
    :data:`PUBLISH_SLACK`). Empty: it may be published."""
    if serving is None:
        return []
    served = _scopes(serving, application)
    refused = []
    for scope, path in _scopes(candidate, application).items():
        new, old = _cv_mape(path), _cv_mape(served[scope]) if scope in served else None
        if new is None or old is None:
            continue
        if new > old * (1 + PUBLISH_MARGIN) + PUBLISH_SLACK:
            who = f"{scope.split('/')[0]}'s own" if "/" in scope else "the pooled"
            refused.append(f"{application} {who} model '{scope.split('/')[-1]}': cross-validated MAPE "
                           f"{100 * new:.1f} % on held-out runs, the serving model's {100 * old:.1f} %")
    return refused
