"""The sources of a job's runtime estimate, in the order the engine asks them.

Each source is a function ``(models, recent, spec, job, risk, soft_risk) -> RuntimeEstimate | None``:
None when it has nothing to say, :class:`~hpcpredict.daemon.errors.HpcPredictError` when it could
have answered but the request did not fit it (the engine notes why and asks the next one).
The first estimate that is not a fallback answers; when every source falls back, the first
fallback does (the walltime model's cold start before the plain request).

1. the application's runtime model, from the job's inputs (history only explains it),
2. the trained walltime model, from the user's history,
3. the recent-history model (the user's last runs of this application),
4. the user's request, else the site default (a fallback).

Every source only reads its model: no lock is taken on the prediction path.

``soft_risk`` (None = not asked): the engine asks it only when it will set a soft
``--time-min``; the source then fills ``soft_s``, the runtime the job outlives with that
probability, from the same pass where it has a quantile (the walltime and recent-history
models), and leaves it 0 (the engine then plans with the point estimate) where it has none.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from .errors import HpcPredictError
from .estimates import RuntimeEstimate
from .jobspec import JobSpec
from .model_set import ModelSet
from .records import JobRecord
from .recent_history import RecentHistoryModel


def from_inputs(models: ModelSet, recent: RecentHistoryModel, spec: JobSpec, job: JobRecord,
                risk: float, soft_risk: float | None = None) -> RuntimeEstimate | None:
    if models.runtime is None or not spec.application:
        return None
    # The bound at the risk target is the upper end of the conformal interval at 1 - risk: its
    # two tails together hold at most `risk`, so the upper one does, whatever the skew. (At
    # 1 - 2 x risk, as if symmetric, held-out runs of the four real codes outlived it 2.1-4.7 %
    # of the time at 3 % risk, mean 3.3 %: slow runs are the longer tail; at 1 - risk 0.7-3.1 %,
    # mean 1.7 %: log-linear, boosted trees, Gaussian process, 5 splits at 50 % training.)
    by_inputs = models.runtime.estimate(spec.application, spec.inputs, spec.nodes, spec.ntasks,
                                        spec.cpus_per_task, bound_coverage=max(0.5, 1.0 - risk), user=job.user)
    if by_inputs is None:
        return None
    # The inputs model answers: history only explains. The recent-history model says "your
    # last runs of APP" at a fraction of the walltime model's cost, and the walltime model is
    # not asked for an answer it would then be scored on without having served it.
    history = recent.predict(job, risk)
    # No soft_s: the inputs model's calibrated interval is two-sided at the bound's coverage
    # (its upper end at 1 - soft_risk would take another calibrated width); the soft
    # --time-min plans with its point estimate (the centre of its log-runtime distribution).
    return RuntimeEstimate(
        runtime_s=by_inputs.runtime_s, low_s=by_inputs.low_s, high_s=by_inputs.high_s,
        coverage=by_inputs.coverage, bound_s=max(by_inputs.bound_s, by_inputs.high_s, by_inputs.runtime_s),
        explanation=by_inputs.explanation + (history.explanation if history is not None else ()),
        model_name=by_inputs.model_name, model_version=by_inputs.model_version,
        bound_calibrated=by_inputs.bound_calibrated)


def from_walltime_model(models: ModelSet, recent: RecentHistoryModel, spec: JobSpec, job: JobRecord,
                        risk: float, soft_risk: float | None = None) -> RuntimeEstimate | None:
    # submit: the job's outcome will score this very answer (a dict entry, not a lock on the model)
    walltime = models.walltime_for(spec.cluster)
    return walltime.submit(job, risk, soft_risk=soft_risk) if walltime is not None else None


def from_recent_history(models: ModelSet, recent: RecentHistoryModel, spec: JobSpec, job: JobRecord,
                        risk: float, soft_risk: float | None = None) -> RuntimeEstimate | None:
    return recent.predict(job, risk, soft_risk=soft_risk)


def from_request(models: ModelSet, recent: RecentHistoryModel, spec: JobSpec, job: JobRecord,
                 risk: float, soft_risk: float | None = None) -> RuntimeEstimate | None:
    return recent.request_or_default(job)


@dataclass(frozen=True)
class Source:
    name: str     # as the explanation names it when it could not answer ("runtime model not used: ...")
    estimate: Callable[[ModelSet, RecentHistoryModel, JobSpec, JobRecord, float, Optional[float]],
                       Optional[RuntimeEstimate]]
    kind: str = ""  # the published model kind it answers from ("" = a rule, not a published model)


SOURCES: tuple[Source, ...] = (
    Source("runtime model", from_inputs, "runtime"),
    Source("walltime model", from_walltime_model, "walltime"),
    Source("recent history", from_recent_history),
    Source("request", from_request),
)


def first_estimate(models: ModelSet, recent: RecentHistoryModel, spec: JobSpec, job: JobRecord, risk: float,
                   soft_risk: float | None = None) -> tuple[RuntimeEstimate, list[str], str]:
    """The first source's estimate that is not a fallback, else the first fallback; why the
    sources that could have answered did not; the model kind that answered ("" = a rule).
    The engine answers with it, and the scheduling replay (``lab/scheduling/policies.py``)
    makes its online predictions with it."""
    first_fallback: tuple[RuntimeEstimate, str] | None = None
    notes: list[str] = []
    for source in SOURCES:
        try:
            estimate = source.estimate(models, recent, spec, job, risk, soft_risk)
        except HpcPredictError as error:
            notes.append(f"{source.name} not used: {error}")
            continue
        if estimate is None:
            continue
        if not estimate.fallback:
            return estimate, notes, source.kind
        if first_fallback is None:
            first_fallback = estimate, source.kind
    assert first_fallback is not None, "the request source always answers"
    return first_fallback[0], notes, first_fallback[1]
