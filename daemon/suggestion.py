"""The --time we suggest for a job, and whether the --time it asks for will likely kill it.

One rule for every place that suggests a limit: ``hpcpredict predict``, the Estimate the Slurm
hooks and the job-output line read (``suggested_time_limit_s``) and ``hpcpredict report``.

The suggestion is the larger of the model's runtime bound at the site's risk and what the
job's recent runs needed: the longest of its last few runs. A model bound is capped at the request (the job cannot run longer), so
for a request below what the runs needed only the runs can say how much to ask for. Taking the
larger never lowers a limit the hooks derive from it below the calibrated bound.

A request is called short only on evidence: when it is below what the job's recent runs took.
The way a job most often dies is a limit below what it needs; a request far above the runs is
not "too short", whatever a request-proportional estimate says.

>>> runs = [9750.0, 9745.0, 318.0, 9736.0, 9748.0]
>>> suggested_time_limit(0.0, runs, floor_s=300)    # the longest run, in whole minutes
9780
>>> print(request_warning(3600, runs, "your last 5 runs of this job"))
your last 5 runs of this job took up to 2.7 h: --time=01:00:00 will likely kill it (4 of 5 ran longer)
>>> request_warning(43200, runs, "your last 5 runs of this job") is None
True
"""
from __future__ import annotations

from typing import Sequence

from .timefmt import human, slurm_time
from .policy.limits import ceil_minute

RECENT_RUNS = 5        # "what the job needed": the longest of its last this many runs


def runs_limit(runtimes: Sequence[float]) -> float:
    """What a job's recent runtimes (oldest first) say a limit must be: the longest of the last
    :data:`RECENT_RUNS` (0 without runs). No margin on top: the model's bound carries the risk,
    and a job that always fills its limit must not be told to ask for more each time."""
    return max(runtimes[-RECENT_RUNS:], default=0.0)


def suggested_time_limit(bound_s: float, runtimes: Sequence[float], *, floor_s: int) -> int:
    """The --time to suggest, in whole minutes (seconds): the model's bound at the risk
    (``bound_s``, 0 when there is none) or what the recent runs need, whichever is larger,
    never below the site floor."""
    # to the millisecond first: a bound capped at the request comes back as exp(log(request)),
    # a hair above it, and must not round up to the next minute
    return max(ceil_minute(floor_s), ceil_minute(round(max(bound_s, runs_limit(runtimes)), 3)))


def request_warning(requested_s: float, runtimes: Sequence[float], scope: str) -> str | None:
    """A plain warning when ``requested_s`` is below what the job's last runs took (None when
    it is not, or there is no request or no run). ``scope`` names the runs ("your last 5 runs
    of lmp")."""
    recent = list(runtimes[-RECENT_RUNS:])
    if requested_s <= 0 or not recent:
        return None
    longest = max(recent)
    if longest <= requested_s:
        return None
    longer = sum(runtime > requested_s for runtime in recent)
    verdict = "will likely kill it" if 2 * longer > len(recent) else "may kill it"
    return (f"{scope} took up to {human(longest)}: --time={slurm_time(requested_s)} {verdict} "
            f"({longer} of {len(recent)} ran longer)")
