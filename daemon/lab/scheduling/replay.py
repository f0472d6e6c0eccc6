"""``evaluate_scheduling``: replay one trace under several walltime policies, side by side.

>>> from hpcpredict.daemon.records import JobRecord
>>> trace = [JobRecord(str(i), "ann", 600.0 * i, runtime_s=300.0, requested_time_s=3600.0,
...                    requested_procs=2, end_time=600.0 * i + 300.0) for i in range(30)]
>>> scores = evaluate_scheduling(trace, procs=4, risk=0.03)
>>> sorted(scores), scores["oracle"]["killed"]
(['easy++', 'hpcpredict', 'oracle', 'user'], 0)
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Iterable

from ...errors import InvalidRequest
from ...records import JobRecord
from ...scheduling.easy import DEFAULT_RELEASE, SLURM_BF_RESOLUTION_S, planning_rule, simulate
from .scores import summarize
from .policies import (DEFAULT_POLICIES, LAST_TWO_POLICIES, POLICIES, PREDICTED_POLICIES, hpcpredict,
                       last_two_predictions, online_predictions, replay_facts, shortened, soft_risk_for)
from ...scheduling.jobs import SimJob
from .workload import Workload, sim_jobs


def evaluate_scheduling(records: Iterable[JobRecord], procs: int, risk: float = 0.03,
                        policies: Iterable[str] = DEFAULT_POLICIES,
                        resolution_s: float = SLURM_BF_RESOLUTION_S, slurm: str = DEFAULT_RELEASE,
                        soft_limit: bool | None = None,
                        progress: Callable[[int, int], None] | None = None,
                        resubmit_killed: bool = False, soft_max_ratio: float | None = None,
                        soft_risk: float | None = None, soft_max_slip_s: float | None = None) -> dict[str, dict]:
    """Metrics per policy (``n``, ``mean_wait_s``, ``mean_bounded_slowdown``, ``utilization``,
    ``killed``, ``killed_node_hours``, ``backfilled``, ``lowered``, ``shortened``, ``procs``,
    ``dropped``, the wait tail of :mod:`.scores`; with ``resubmit_killed`` every killed job is
    submitted again with its user's request and scored from its first submission to its final
    end, and ``resubmitted`` is added). ``slurm``, ``soft_limit``: the release replayed
    (``"X.Y[.Z]"``) and whether ``time_min_as_soft_limit`` is set (:func:`hpcpredict.daemon.scheduling.easy.simulate`); each
    policy is told the replayed controller (:func:`.policies.replay_facts`); ``soft_max_ratio``,
    ``soft_max_slip_s``: the guards of ``hpcpredict``'s soft ``--time-min`` (None: the
    configuration's defaults); ``soft_risk``: its value, the estimate at that risk (None: the
    configuration's for the release's planning rule, :func:`.policies.soft_risk_for`)."""
    names = list(policies)
    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        raise InvalidRequest("policy", f"unknown {', '.join(unknown)} (choose from {', '.join(POLICIES)})")
    try:
        planning_rule(slurm, soft_limit)
    except ValueError as error:
        raise InvalidRequest("--slurm", str(error)) from None
    chosen_risk = soft_risk
    if soft_risk is None:
        soft_risk = soft_risk_for(replay_facts(slurm, soft_limit, procs))
    records = list(records)
    workload = sim_jobs(records, procs)
    if not workload.jobs:
        reasons = ", ".join(f"{count} {reason.replace('_', ' ')}" for reason, count in workload.dropped.items())
        raise InvalidRequest("trace", f"no job to replay on {procs} processors ({reasons or 'no jobs'})")
    answers = online_predictions(records, risk, progress=progress, soft_risk=soft_risk) \
        if PREDICTED_POLICIES & set(names) else {}
    return replay_policies(workload, answers, names, resolution_s, slurm, soft_limit, resubmit_killed,
                           soft_max_ratio, soft_max_slip_s, chosen_risk)


def replay_policies(workload: Workload, answers: dict, names: Iterable[str],
                    resolution_s: float = SLURM_BF_RESOLUTION_S, slurm: str = DEFAULT_RELEASE,
                    soft_limit: bool | None = None, resubmit_killed: bool = False,
                    soft_max_ratio: float | None = None, soft_max_slip_s: float | None = None,
                    soft_risk: float | None = None) -> dict[str, dict]:
    """:func:`evaluate_scheduling` on a workload whose predictions (``online_predictions``)
    are already made: one replay per policy (EASY++'s own predictions are made here).
    ``soft_risk``: the soft value's risk the answers were made at, where not the default."""
    names = list(names)
    # every policy is told the controller of this release, as the daemon would read it
    facts = replay_facts(slurm, soft_limit, workload.procs)
    last_two = last_two_predictions(workload.records) if LAST_TWO_POLICIES & set(names) else {}
    chosen: dict[str, Callable[..., SimJob]] = dict(POLICIES)
    if soft_max_ratio is not None or soft_max_slip_s is not None or soft_risk is not None:
        chosen["hpcpredict"] = partial(hpcpredict, soft_max_ratio=soft_max_ratio, soft_max_slip_s=soft_max_slip_s,
                                       soft_risk=soft_risk)
    scores = {}
    for name in names:
        fed = last_two if name in LAST_TWO_POLICIES else answers
        jobs = [chosen[name](job, fed.get(id(record)), facts) for job, record in zip(workload.jobs, workload.records)]
        scores[name] = replay_jobs(workload, jobs, resolution_s, slurm, soft_limit, resubmit_killed)
    return scores


def replay_jobs(workload: Workload, jobs: list, resolution_s: float = SLURM_BF_RESOLUTION_S,
                slurm: str = DEFAULT_RELEASE, soft_limit: bool | None = None,
                resubmit_killed: bool = False) -> dict:
    """The scores of one replay of ``workload`` whose jobs a policy has set (``jobs[i]`` is
    ``workload.jobs[i]`` with its limits)."""
    outcomes = simulate(jobs, workload.procs, resolution_s, slurm, soft_limit, resubmit_killed)
    scores = summarize(outcomes, workload.procs)
    scores["shortened"] = sum(shortened(before, after) for before, after in zip(workload.jobs, jobs))
    scores["procs"] = workload.procs
    scores["dropped"] = sum(workload.dropped.values())
    if resubmit_killed:
        scores["resubmitted"] = sum(o.job.retry_of >= 0 for o in outcomes)
    return scores
