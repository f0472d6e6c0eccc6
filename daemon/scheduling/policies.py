"""Walltime policies compared in a scheduling replay: what each sets on a job at submission.

Every policy maps (job with the user's request, our online prediction) to the job's limits:

- ``user``: the requests as given.
- ``hpcpredict``: exactly what ``job_submit.lua`` does, through
  :func:`~hpcpredict.daemon.walltime_policy.plan_limits` on our bound at the risk target
  (``--time-min`` = the bound when the user gave ``--time``, ``--time`` = the bound when not).
- ``oracle``: each limit equal to the true runtime (the most any predictor could give).
- ``oracle-time-min``: the hook's policy fed the true runtime as its bound: the most any
  predictor can give through Slurm's ``--time-min``.
- ``hpcpredict-time``: a site that replaces the request by the bound (``--time`` = the bound,
  capped at the request): a kill limit at the risk target on every predicted job.
- ``hpcpredict-soft``: the hook's ``--time-min`` as a soft limit (Slurm >= 23.11
  ``time_min_as_soft_limit``: planned on, never enforced; modelled, not tested on a real Slurm).
- ``hpcpredict-soft-point``: the same soft limit set to our point estimate instead of the
  bound: where a limit never kills, the bound's margin only costs scheduling accuracy.

Predictions are made online as ``hpcpredict evaluate walltime`` makes them: in submission
order, a job sees only the jobs that ended (in the trace) before it was submitted.
"""
from __future__ import annotations

import dataclasses
import heapq
from typing import Callable

from ..history.evaluate import end_time, scorable
from ..estimates import RuntimeEstimate
from ..records import JobRecord
from .workload import SimJob
from ..walltime_policy import LimitChange, plan_limits

Policy = Callable[[SimJob, RuntimeEstimate], SimJob]


def _apply(job: SimJob, change: LimitChange, soft: bool = False) -> SimJob:
    if change.time_limit_s is not None:
        job = dataclasses.replace(job, limit_s=float(change.time_limit_s))
    if change.time_min_s is not None:
        job = dataclasses.replace(job, time_min_s=float(change.time_min_s), soft_time_min=soft)
    return job


def user(job: SimJob, prediction: RuntimeEstimate) -> SimJob:
    return job


def hpcpredict(job: SimJob, prediction: RuntimeEstimate) -> SimJob:
    return _apply(job, plan_limits(bound_s=prediction.bound_s, requested_s=job.request_s,
                                   fallback=prediction.fallback))


def oracle(job: SimJob, prediction: RuntimeEstimate) -> SimJob:
    return dataclasses.replace(job, limit_s=max(job.work_s, 1.0), time_min_s=0.0, soft_time_min=False)


def oracle_time_min(job: SimJob, prediction: RuntimeEstimate) -> SimJob:
    return _apply(job, plan_limits(bound_s=max(job.work_s, 1.0), requested_s=job.request_s))


def hpcpredict_time(job: SimJob, prediction: RuntimeEstimate) -> SimJob:
    change = plan_limits(bound_s=prediction.bound_s, requested_s=0, fallback=prediction.fallback,
                         max_time_s=job.request_s or None)
    return _apply(job, change)


def hpcpredict_soft(job: SimJob, prediction: RuntimeEstimate) -> SimJob:
    return _apply(job, plan_limits(bound_s=prediction.bound_s, requested_s=job.request_s,
                                   fallback=prediction.fallback), soft=True)


def hpcpredict_soft_point(job: SimJob, prediction: RuntimeEstimate) -> SimJob:
    return _apply(job, plan_limits(bound_s=prediction.runtime_s, requested_s=job.request_s,
                                   fallback=prediction.fallback), soft=True)


POLICIES: dict[str, Policy] = {
    "user": user, "hpcpredict": hpcpredict, "oracle": oracle, "oracle-time-min": oracle_time_min,
    "hpcpredict-time": hpcpredict_time, "hpcpredict-soft": hpcpredict_soft,
    "hpcpredict-soft-point": hpcpredict_soft_point,
}
DEFAULT_POLICIES = ("user", "hpcpredict", "oracle")


def shortened(before: SimJob, after: SimJob) -> bool:
    """True when a policy set a limit or a time_min below the job's request."""
    return after.limit_s < before.limit_s or 0 < after.time_min_s < before.limit_s


def online_predictions(records: list[JobRecord], risk: float, model=None,
                       progress: Callable[[int, int], None] | None = None) -> dict[int, RuntimeEstimate]:
    """Our answer for every scorable record at its submission, keyed by ``id(record)``."""
    from ..history.model import HpcPredictModel

    model = model or HpcPredictModel()
    ordered = scorable(records)
    answers: dict[int, RuntimeEstimate] = {}
    running: list[tuple[float, int]] = []     # (trace end, index) of jobs not yet observed
    for index, record in enumerate(ordered):
        while running and running[0][0] <= record.submit_time:
            model.observe(ordered[heapq.heappop(running)[1]])
        answers[id(record)] = model.submit(record, risk, explain=False)  # submit: its outcome then scores it
        heapq.heappush(running, (end_time(record), index))
        if progress is not None and (index % 500 == 0 or index == len(ordered) - 1):
            progress(index + 1, len(ordered))
    return answers
