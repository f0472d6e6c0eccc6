"""The one decision of the limits applied to a job: every caller asks :func:`decide`.

The daemon at submission (``engine``), the scheduling replay's ``hpcpredict`` policy and
``hpcpredict explain`` all go through here, with the controller's facts as a value
(:class:`~.controller.ControllerFacts`: the daemon's current ones, or those of the release a
replay models). :func:`decide_at_allocation` is the answer's place once nodes are allocated.

>>> from hpcpredict.daemon.config import PolicyConfig
>>> from hpcpredict.daemon.policy.controller import ControllerFacts
>>> job = JobAsk(time_limit_s=14400, procs=4)
>>> predicted = Predicted(runtime_s=2500, soft_s=2900, suggested_s=4000)
>>> decide(job, predicted, PolicyConfig(), ControllerFacts.for_release("24.11.5")).limits
LimitChange(time_limit_s=None, time_min_s=2940, reason='soft_time_min', mode='soft')
>>> old = decide(job, predicted, PolicyConfig(), ControllerFacts.for_release("22.05.8"))
>>> old.limits.mode, old.why
('advise', 'Slurm 22.05.8 has no time_min_as_soft_limit (it came with 23.11.0): --time-min would be a kill limit')
>>> decide(job, predicted, PolicyConfig(partitions=("batch",)), ControllerFacts.for_release("24.11")).why
'partition (none named) is not in [policy] partitions'
"""
from __future__ import annotations

from dataclasses import dataclass

from .controller import ControllerFacts, resolve_mode
from .limits import DEFAULT_FLOOR_S, DEFAULT_SITE_CAP_S, LimitChange, plan_limits, user_line
from .scope import limits_withheld


@dataclass(frozen=True)
class JobAsk:
    """What the job asked for, as the submission hook reports it (seconds)."""

    time_limit_s: float = 0.0      # its --time (0 = none, math.inf = UNLIMITED)
    time_min_s: float = 0.0        # the user's own --time-min (0 = none)
    default_time_s: float = 0.0    # the partition's DefaultTime: the limit without --time (0 = unknown)
    max_time_s: float = 0.0        # the smallest of the partition's MaxTime and the QOS's MaxWall (0 = none)
    procs: int = 0                 # the CPUs it requested (0 = unknown)
    user: str = ""
    account: str = ""
    partition: str = ""


@dataclass(frozen=True)
class Predicted:
    """What the daemon predicts for the job (seconds)."""

    runtime_s: float               # the point estimate (what the user is told)
    soft_s: float                  # the runtime outlived with probability [policy] soft_risk: a soft --time-min
    suggested_s: float             # the suggested --time: bound mode's kill limit, advice's suggestion
    low_s: float = 0.0
    high_s: float = 0.0
    coverage: float = 0.0
    risk: float = 0.0
    calibrated: bool = False       # suggested_s holds at the risk (RuntimeEstimate.bound_calibrated)
    fallback: bool = False         # no model knew the job


@dataclass(frozen=True)
class Decision:
    limits: LimitChange            # what the hook applies
    user_message: str              # the line the user reads at submission
    why: str                       # why this mode: the policy, the controller, the site's scope


def mode_for(job: JobAsk, policy, facts: ControllerFacts) -> tuple[str, str]:
    """(mode, why) for this job: ``advise`` outside the site's scope, else ``[policy] mode``
    resolved against the controller. The daemon asks it before predicting (only a soft
    ``--time-min`` reads the estimate at ``soft_risk``)."""
    withheld = limits_withheld(policy, user=job.user, account=job.account, partition=job.partition)
    if withheld:
        return "advise", withheld
    return resolve_mode(policy.mode, facts)


def decide(job: JobAsk, predicted: Predicted, policy, facts: ControllerFacts, *,
           site_cap_s: float = DEFAULT_SITE_CAP_S, user_message: bool = True) -> Decision:
    """The limits for ``job`` at submission and the user's line (``user_message=False``: no
    line, for the replay). ``policy``: the ``[policy]`` section (PolicyConfig); ``site_cap_s``:
    ``[limits] max_time_s``."""
    mode, why = mode_for(job, policy, facts)
    given = job.time_limit_s
    # soft: the job's limit is its --time, else the partition's DefaultTime (else MaxTime)
    requested = given or (job.default_time_s if mode == "soft" else 0)
    floor_s = getattr(policy, "min_time_limit_s", DEFAULT_FLOOR_S)
    limits = plan_limits(mode=mode, runtime_s=predicted.soft_s, bound_s=predicted.suggested_s, requested_s=requested,
                         user_time_min_s=job.time_min_s, max_time_s=job.max_time_s or None, floor_s=floor_s,
                         site_cap_s=site_cap_s, fallback=predicted.fallback, soft_max_ratio=policy.soft_max_ratio,
                         bound_calibrated=predicted.calibrated, rule=facts.rule, procs=job.procs,
                         machine_procs=facts.total_cpus)
    message = ""
    if user_message:
        message = user_line(limits, runtime_s=predicted.runtime_s, low_s=predicted.low_s, high_s=predicted.high_s,
                            coverage=predicted.coverage, bound_s=predicted.suggested_s, risk=predicted.risk,
                            requested_s=given, job_limit_s=job.default_time_s or job.max_time_s,
                            fallback=predicted.fallback, floor_s=floor_s)
    return Decision(limits, message, why)


NOT_AT_SUBMISSION = LimitChange(None, None, "not_at_submission", "advise")


def decide_at_allocation(job: JobAsk, predicted: Predicted, policy, facts: ControllerFacts) -> Decision:
    """The limits once the job's nodes are allocated (PrologSlurmctld's answer): none yet. A
    running job's TimeMin cannot be changed; what may change here is an automatic ``--time``
    (the one the daemon set) lowered to the refined bound, the rule PrologSlurmctld applies by
    itself today (``prolog_adjust_time_limit``). It belongs here, decided once."""
    return Decision(NOT_AT_SUBMISSION, "", "limits are set at submission")


def limits_meaning(mode: str, *, time_limit_s: float | None, time_min_s: float | None) -> str:
    """What a decided limit does, as ``explain`` restates it ("" for a ``--time``: it says itself).

    >>> limits_meaning("soft", time_limit_s=None, time_min_s=600)
    'soft: planned with it, never stopped before --time'
    """
    if time_limit_s:
        return ""
    if time_min_s and mode == "soft":
        return "soft: planned with it, never stopped before --time"
    if time_min_s:
        return "a kill limit: backfill may lower --time to it"
    return ""


__all__ = ["Decision", "JobAsk", "NOT_AT_SUBMISSION", "Predicted", "decide", "decide_at_allocation",
           "limits_meaning", "mode_for"]
