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

The answer is then composed with the user's recent runs comparable to the job
(:func:`compose`, the one place that decides): where those runs are steady, the estimate of
a history source is never above what they took (the walltime model reads the
request as a feature and scales it by the share of their requests the user's runs used: 4.05 h
for user 91 of KTH-SP2 asking 5 h, whose every recent run took 2.7 h asking 3:20:00), and only
a calibrated bound shortens the request (the recent-history model, answering where the
walltime model cold-starts on a request 4 x any the user made, suggested 03:00:00 at 14 h
where the walltime model kept 13 h): a larger request never gets a smaller suggestion from
the same runs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional

from .errors import HpcPredictError
from .estimates import RuntimeEstimate
from .jobspec import JobSpec
from .model_set import ModelSet
from .records import JobRecord
from .timefmt import human
from .recent_history import RECENT_RUNS, RecentHistoryModel, RunsBasis


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
                   soft_risk: float | None = None) -> tuple[RuntimeEstimate, list[str], str, RunsBasis]:
    """The first source's estimate that is not a fallback, else the first fallback, composed
    with the user's comparable runs (:func:`compose`); why the sources that could have answered
    did not; the model kind that answered ("" = a rule); those runs. The engine answers with
    it, and the scheduling replay (``lab/scheduling/policies.py``) makes its online
    predictions with it."""
    estimate, notes, kind = _first_source(models, recent, spec, job, risk, soft_risk)
    if estimate.fallback:
        return estimate, notes, kind, RunsBasis()
    basis = recent.basis(job.user, job.application, float(job.requested_time_s or 0.0), job.procs)
    # The inputs model follows the job's inputs, not the user's history: only history sources are held to it.
    if kind == "runtime":
        return estimate, notes, kind, basis
    return compose(estimate, basis, float(job.requested_time_s or 0.0), risk), notes, kind, basis


def compose(estimate: RuntimeEstimate, basis: RunsBasis, request_s: float, risk: float) -> RuntimeEstimate:
    """A history source's estimate composed with the user's comparable runs (``basis``).

    - when those runs are steady (:attr:`RunsBasis.steady`) the estimate is at most the
      longest of them (``needed_s``): whatever they asked for, they took the same, so the
      request is no evidence the job runs longer, whatever share of it the runs used. Where
      they vary the walltime model may scale the request: runs do follow requests there, on
      average;
    - a bound that is not calibrated at the risk (a rule's, the recent-history model's: on
      KTH-SP2 a job whose last 5 comparable runs lay within 25 % of each other outlived 1.1 x
      the longest 17 % of the time, on HPC2N 23 %; 15 % / 30 % where they varied) never
      shortens a request: the suggested --time is then the request, and what
      the runs needed (:mod:`hpcpredict.daemon.suggestion`). The suggestion is thus the request
      or a calibrated bound below it, whichever model answered, and does not drop where the
      walltime model cold-starts on a request 4 x any the user made.

    >>> from hpcpredict.daemon.recent_history import RunsBasis
    >>> runs = RunsBasis(runtimes=(9745.0,) * 5, requests=(12000.0,) * 5, scope="your last {n} runs of this job")
    >>> model = RuntimeEstimate(runtime_s=14580.0, low_s=9000.0, high_s=18000.0, coverage=0.8, bound_s=18000.0,
    ...                         explanation=("estimate: 81% of your request",), model_name="hpcpredict",
    ...                         bound_calibrated=True)
    >>> held = compose(model, runs, 18000.0, 0.03)
    >>> held.runtime_s, held.bound_s, held.bound_calibrated
    (9745.0, 18000.0, True)
    >>> rule = RuntimeEstimate(runtime_s=9745.0, low_s=9000.0, high_s=9770.0, coverage=0.0, bound_s=10747.0,
    ...                        explanation=(), model_name="recent-history")
    >>> compose(rule, runs, 172800.0, 0.03).bound_s        # not a promise at 3 %: the request stands
    172800.0
    """
    if not basis.runtimes:
        return estimate
    ceiling = basis.bound_s(risk) if basis.killed else basis.needed_s
    # Only steady runs are held to: where they vary, the walltime model's choice stands (on HPC2N
    # and KTH-SP2 holding every estimate to them lost 0.018 / 0.010 of accuracy: jobs asking for
    # more than their user's last did run longer, on average).
    # Only steady runs hold the estimate: where they vary the walltime model's choice stands.
    # Measured (online, KTH-SP2 / HPC2N subset): holding every estimate to the runs lost 0.010 /
    # 0.018 of mean accuracy (jobs asking for more than their user's last did run longer, on
    # average); holding only steady runs' costs 0.002 / 0.012 (0.6137 -> 0.6117, 0.5354 -> 0.5238).
    held_to_runs = basis.steady
    if request_s > 0:
        ceiling = min(ceiling, request_s)          # a job cannot run longer than its limit
    point = min(estimate.runtime_s, ceiling) if held_to_runs else estimate.runtime_s
    bound = estimate.bound_s
    if request_s > 0 and not estimate.bound_calibrated:
        bound = request_s
    bound = max(bound, point)
    explanation = estimate.explanation
    if point < estimate.runtime_s:
        explanation = tuple(line for line in explanation if not line.startswith("estimate:")) + (
            f"estimate: {basis.named()} took up to {human(basis.needed_s)}, steadily: the request is no "
            f"evidence this one runs longer (the walltime model, which scales requests, said "
            f"{human(estimate.runtime_s)})",)
    return replace(estimate, runtime_s=point, bound_s=bound, high_s=max(estimate.high_s, point),
                   low_s=min(estimate.low_s, point) if estimate.low_s > 0 else estimate.low_s,
                   # The soft --time-min stays the model's own value at soft_risk: it is the plan
                   # the per-rule policy was chosen with (daemon/policy/limits.py), and capping it at
                   # steady runs made more jobs overrun it (KTH-SP2, 26.05's rule: wide p99 +4.2 -> +6.6 %).
                   soft_s=max(estimate.soft_s, point) if estimate.soft_s else estimate.soft_s,
                   explanation=explanation)


def _first_source(models: ModelSet, recent: RecentHistoryModel, spec: JobSpec, job: JobRecord, risk: float,
                  soft_risk: float | None = None) -> tuple[RuntimeEstimate, list[str], str]:
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
