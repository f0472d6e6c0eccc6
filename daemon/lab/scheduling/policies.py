"""Walltime policies compared in a scheduling replay: what each sets on a job at submission.

Every policy maps (job with the user's request, a prediction, the controller replayed: its
:class:`~hpcpredict.daemon.policy.ControllerFacts`, :func:`replay_facts`, whose ``rule`` says
how it plans a running soft job, ``hard_end`` or ``soft_then_halfway``, or ``kill`` where
``--time-min`` is a kill limit) to the job's limits:

- ``user``: the requests as given.
- ``hpcpredict``: the product's default policy for the cluster, through
  :func:`~hpcpredict.daemon.policy.plan_limits` exactly as the hook applies it: with
  ``time_min_as_soft_limit`` (Slurm 23.11+ with the option) mode ``soft``, our estimate at
  ``[policy] soft_risk`` for the release's planning rule (the runtime the job outlives with that
  probability, as the daemon answers it at risk 0.03: :func:`online_predictions` with
  ``soft_risk``, through the daemon's own sources, the user's recent runs where the walltime
  model knows nothing) as a soft ``--time-min`` guarded by ``soft_max_slip_s`` (the slip the
  rule lets it cause a waiting reservation, by the job's share of the machine); without it
  (22.05, 23.02, or a later release with the option off) mode ``advise``: no limit changes, so
  nothing is killed.
- ``oracle``: each limit equal to the true runtime (the most any predictor could give).
- ``easy++``: Tsafrir, Etsion and Feitelson's EASY++ (IEEE TPDS 18(6), 2007) as a Slurm site
  could run it: the average of the user's last two runtimes (jobs ended before the
  submission; none with fewer than two) as a soft ``--time-min``, the job killed only at its
  request. EASY++ also re-plans a running job that outlives its prediction (adding 1 min,
  5 min, 15 min, 30 min, 1 h, 2 h, 5 h... up to the request) and backfills shortest
  predicted job first; Slurm can do neither: a running job's TimeMin cannot be changed (it
  plans the job by its release's rule instead: at its hard end, or on 25.05.4+ halfway to it
  once past its soft end) and it backfills in priority order, so neither is modelled.
  Without the soft option its ``--time-min`` is a kill limit (EASY++ cannot be deployed there:
  the replay shows the kills).

``--all-policies`` adds what a site could choose instead:

- ``hpcpredict-soft``: mode ``soft`` with no ``soft_max_ratio`` guard (every estimate below the
  request becomes a ``--time-min``); a kill limit where the cluster has no soft option.
- ``hpcpredict-bound``: mode ``bound``: our bound at the risk target as ``--time-min`` (and as
  ``--time`` where the user gave none): a promise at the site's risk where ``--time-min`` kills.
- ``hpcpredict-time``: a site that replaces the request by the bound (``--time`` = the bound,
  capped at the request): a kill limit at the risk target on every predicted job.
- ``oracle-time-min``: the product's policy fed the true runtime: the most any predictor can
  give through Slurm's ``--time-min`` (mode ``soft`` where it is soft, ``bound`` otherwise).

Predictions are made online as ``hpcpredict evaluate walltime`` makes them: in submission
order, a job sees only the jobs that ended (in the trace) before it was submitted; the same
holds for EASY++'s last two runtimes (:func:`last_two_predictions`).
"""
from __future__ import annotations

import dataclasses
import heapq
from collections import defaultdict, deque
from typing import Callable

from ...config import RequestBounds, PolicyConfig
from ...model_set import ModelSet
from ...estimates import RuntimeEstimate
from ..history.evaluation import end_time, scorable
from ...jobspec import JobSpec
from ...recent_history import RecentHistoryModel
from ...records import JobRecord
from ...sources import first_estimate
from ...policy import ControllerFacts, JobAsk, LimitChange, Predicted, decide, plan_limits
from ...scheduling.jobs import SimJob

Policy = Callable[[SimJob, "RuntimeEstimate | None", ControllerFacts], SimJob]
# What the daemon passes plan_limits by default (engine.py): the configuration's defaults.
_POLICY, _LIMITS = PolicyConfig(), RequestBounds()


def soft_risk_for(controller: ControllerFacts) -> float:
    """The risk of the soft ``--time-min`` the daemon answers with on ``controller`` by default
    (``[policy] soft_risk_hard_end`` / ``soft_risk_halfway``, by its planning rule)."""
    return _POLICY.soft_risk_for(controller.rule)


def _apply(job: SimJob, change: LimitChange) -> SimJob:
    if change.time_limit_s is not None:
        job = dataclasses.replace(job, limit_s=float(change.time_limit_s))
    if change.time_min_s is not None:
        job = dataclasses.replace(job, time_min_s=float(change.time_min_s))
    return job


def _plan(job: SimJob, prediction: RuntimeEstimate | None, mode: str, soft_max_ratio: float = 0.0) -> SimJob:
    if prediction is None:
        return job
    return _apply(job, plan_limits(mode=mode, runtime_s=prediction.soft_value_s, bound_s=prediction.bound_s,
                                   requested_s=job.request_s, fallback=prediction.fallback,
                                   soft_max_ratio=soft_max_ratio, bound_calibrated=prediction.bound_calibrated))


def user(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts) -> SimJob:
    return job


def hpcpredict(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts,
               soft_max_ratio: float | None = None, soft_max_slip_s: float | None = None,
               soft_risk: float | None = None) -> SimJob:
    """``[policy] mode = "auto"`` (the default), decided as the daemon decides it
    (:func:`~hpcpredict.daemon.policy.decide`) on ``controller`` (:func:`replay_facts`) with the
    default configuration; ``soft_max_ratio``, ``soft_max_slip_s``, ``soft_risk``: those keys
    replaced (None: their defaults). ``prediction.soft_s`` must be the estimate at the soft risk
    replayed (:func:`online_predictions` with ``soft_risk``: :func:`soft_risk_for` by default)."""
    if prediction is None:
        return job
    asked = JobAsk(time_limit_s=job.request_s, procs=job.procs,
                   # a job without --time runs under the partition's limit
                   max_time_s=0.0 if job.request_s > 0 else job.limit_s)
    predicted = Predicted(runtime_s=prediction.runtime_s, soft_s=prediction.soft_value_s,
                          suggested_s=max(prediction.bound_s, prediction.runtime_s),
                          calibrated=prediction.bound_calibrated, fallback=prediction.fallback)
    policy = _POLICY
    if soft_max_ratio is not None:
        policy = dataclasses.replace(policy, soft_max_ratio=soft_max_ratio)
    if soft_max_slip_s is not None:
        policy = dataclasses.replace(policy, soft_max_slip_s=soft_max_slip_s)
    if soft_risk is not None:
        policy = dataclasses.replace(policy, soft_risk=soft_risk)
    return _apply(job, decide(asked, predicted, policy, controller, site_cap_s=_LIMITS.max_time_s,
                              user_message=False).limits)


def replay_facts(release: str, soft_option: bool | None = None, procs: int = 0) -> ControllerFacts:
    """The controller a replay of ``release`` models (``soft_option``: whether its
    SchedulerParameters has ``time_min_as_soft_limit``; None: it has), of ``procs`` CPUs: what
    the daemon would read from its ``scontrol show config``."""
    return ControllerFacts.for_release(release, soft_option is not False, total_cpus=procs)


def oracle(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts) -> SimJob:
    return dataclasses.replace(job, limit_s=max(job.work_s, 1.0), time_min_s=0.0)


def easy_plus_plus(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts,
                   soft_max_ratio: float = 0.0) -> SimJob:
    """``prediction``: the user's last-two average (:func:`last_two_predictions`);
    ``soft_max_ratio``: the guard a site would add to keep the wait tail (0 = none, as published)."""
    return _plan(job, prediction, "soft", soft_max_ratio)


def hpcpredict_soft(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts) -> SimJob:
    return _plan(job, prediction, "soft")


def hpcpredict_bound(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts) -> SimJob:
    return _plan(job, prediction, "bound")


def hpcpredict_time(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts) -> SimJob:
    if prediction is None:
        return job
    return _apply(job, plan_limits(bound_s=prediction.bound_s, requested_s=0, fallback=prediction.fallback,
                                   max_time_s=job.request_s or None, bound_calibrated=prediction.bound_calibrated))


def oracle_time_min(job: SimJob, prediction: RuntimeEstimate | None, controller: ControllerFacts) -> SimJob:
    work = max(job.work_s, 1.0)
    return _apply(job, plan_limits(mode="soft" if controller.soft_ok else "bound", runtime_s=work, bound_s=work,
                                   requested_s=job.request_s))


POLICIES: dict[str, Policy] = {
    "user": user, "hpcpredict": hpcpredict, "oracle": oracle, "easy++": easy_plus_plus,
    "hpcpredict-soft": hpcpredict_soft, "hpcpredict-bound": hpcpredict_bound,
    "hpcpredict-time": hpcpredict_time, "oracle-time-min": oracle_time_min,
}
DEFAULT_POLICIES = ("user", "hpcpredict", "oracle", "easy++")
# The predictions each policy is fed ("ours": online_predictions; "last-two": EASY++'s).
LAST_TWO_POLICIES = frozenset({"easy++"})
PREDICTED_POLICIES = frozenset(POLICIES) - {"user", "oracle", "oracle-time-min"} - LAST_TWO_POLICIES


def shortened(before: SimJob, after: SimJob) -> bool:
    """True when a policy set a limit or a time_min below the job's request."""
    return after.limit_s < before.limit_s or 0 < after.time_min_s < before.limit_s


def online_predictions(records: list[JobRecord], risk: float, model=None,
                       progress: Callable[[int, int], None] | None = None,
                       soft_risk: float | None = None) -> dict[int, RuntimeEstimate]:
    """The daemon's answer for every scorable record at its submission, keyed by ``id(record)``:
    its sources in its order (:func:`~hpcpredict.daemon.sources.first_estimate`), here the
    walltime model (``model``, default a fresh :class:`WalltimeModel`), then the recent-history
    model (the user's last runs, where the walltime model falls back), then the request.
    ``soft_risk``: each answer also carries ``soft_s``, the runtime at that risk from the same
    pass, as the daemon configured with ``risk`` sets its soft ``--time-min`` (the walltime
    model's adaptive risk offset follows ``risk``). Both models learn each job when it ended
    in the trace, as the daemon observes it."""
    from ...history.model import WalltimeModel

    model = model or WalltimeModel()
    models = ModelSet(walltime=model)
    recent = RecentHistoryModel(_POLICY.history_window, _POLICY.default_runtime_s)
    ordered = scorable(records)
    answers: dict[int, RuntimeEstimate] = {}
    running: list[tuple[float, int]] = []     # (trace end, index) of jobs not yet observed
    for index, record in enumerate(ordered):
        while running and running[0][0] <= record.submit_time:
            ended = ordered[heapq.heappop(running)[1]]
            recent.observe(ended)
            model.observe(ended)
        # what the sources read of the request besides the job (no inputs model: no inputs)
        spec = JobSpec(user=record.user, application=record.application, cluster=record.cluster)
        # the walltime model's answer is scored by the job's outcome (at risk; soft_s is read-only)
        answers[id(record)] = first_estimate(models, recent, spec, record, risk, soft_risk)[0]
        heapq.heappush(running, (end_time(record), index))
        if progress is not None and (index % 500 == 0 or index == len(ordered) - 1):
            progress(index + 1, len(ordered))
    return answers


def last_two_predictions(records: list[JobRecord]) -> dict[int, RuntimeEstimate]:
    """EASY++'s prediction for every scorable record at its submission, keyed by ``id(record)``:
    the mean runtime of the user's last two jobs that ended (in the trace) before it was
    submitted, in the order they ended; records of users with fewer get none."""
    ordered = scorable(records)
    recent: dict[str, deque] = defaultdict(lambda: deque(maxlen=2))
    answers: dict[int, RuntimeEstimate] = {}
    running: list[tuple[float, int]] = []
    for index, record in enumerate(ordered):
        while running and running[0][0] <= record.submit_time:
            ended = ordered[heapq.heappop(running)[1]]
            recent[ended.user].append(ended.runtime_s)
        last = recent.get(record.user)
        if last is not None and len(last) == 2:
            mean = max((last[0] + last[1]) / 2.0, 1.0)
            answers[id(record)] = RuntimeEstimate(runtime_s=mean, low_s=mean, high_s=mean, coverage=0.0,
                                                  bound_s=mean, explanation=(), model_name="easy++-last-two")
        heapq.heappush(running, (end_time(record), index))
    return answers
