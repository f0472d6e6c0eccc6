"""The forecast's contract: what the queue looks like, what we believe of each job, what we answer.

Times are epoch seconds (``*_s`` of a moment) or durations in seconds; ``math.inf`` stands for
an unlimited time limit.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuntimeBelief:
    """hpcpredict's predictive distribution of a job's runtime: log-normal.

    ``median_s`` is the stored estimate; ``log_sigma`` the spread of ln(runtime) (0 = certain).
    A draw is clipped to the job's time limit (Slurm ends it there)."""

    median_s: float
    log_sigma: float


@dataclass(frozen=True)
class QueuedJob:
    job_id: str
    user: str                          # the owner, as Slurm names it
    partition: str
    cpus: int                          # processors held (running) or asked for (pending)
    time_limit_s: float                # the kill limit Slurm holds now (math.inf: unlimited)
    time_min_s: float | None           # a soft --time-min, or None
    submit_s: float
    start_s: float | None              # when it started (running), None while pending
    priority_rank: int                 # pending jobs: 0 is scheduled first (Slurm's order); running: 0
    belief: RuntimeBelief | None       # None: nothing known, the job runs to its limit


@dataclass(frozen=True)
class QueueSnapshot:
    taken_s: float                     # when the picture was read
    total_cpus: int
    planning_rule: str                 # policy.controller RULES: kill | hard_end | soft_then_halfway | unknown
    jobs: tuple[QueuedJob, ...]        # running and pending
    # The arrivals model's source (simulate.py): jobs submitted in the hours before the picture
    # (submit_s at or before taken_s; running, pending or done), and since when submissions were
    # watched (None: not watched, no later submission is modelled)
    recent: tuple[QueuedJob, ...] = ()
    recent_from_s: float | None = None


@dataclass(frozen=True)
class StartForecast:
    job_id: str
    median_start_s: float              # epoch
    low80_start_s: float               # the 80 % interval: 10th and 90th percentile of the runs
    high80_start_s: float
    slurm_start_s: float | None        # the same forward run with every job at its limit (squeue --start's method)
    runs: int
