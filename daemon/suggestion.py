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

from .recent_history import RECENT_RUNS
from .timefmt import human, slurm_time
from .policy.limits import ceil_minute



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
    # Slurm keeps limits in whole minutes: `-t 0:00:30` runs with 00:01:00, which holds a 47 s run.
    limit_s = ceil_minute(requested_s)
    longest = max(recent)
    if longest <= limit_s:
        return None
    longer = sum(runtime > limit_s for runtime in recent)
    verdict = "will likely kill it" if 2 * longer > len(recent) else "may kill it"
    return (f"{scope} took up to {human(longest)}: --time={slurm_time(requested_s)} {verdict} "
            f"({longer} of {len(recent)} ran longer)")


def suggestion_basis(time_limit_s: int, *, requested_s: float, runs: Sequence[float], scope: str, bound_s: float,
                     calibrated: bool, floor_s: float, risk: float) -> str | None:
    """The one line saying what the suggested --time (``time_limit_s``, from
    :func:`suggested_time_limit`) was made of, so a suggestion that changes with the request
    says why (None without recent runs: the model's bound speaks for itself). ``calibrated``:
    ``bound_s`` holds at ``risk`` (``RuntimeEstimate.bound_calibrated``).

    A suggestion kept at the request names what the runs took and the limit that would have
    held them, as a fact about them, not a promise at the risk: a job whose last 5 comparable
    runs lay within 25 % of each other outlived 1.1 x the longest for 17 % of KTH-SP2's jobs,
    23 % of HPC2N's.

    >>> runs = [9745.0] * 5
    >>> print(suggestion_basis(172800, requested_s=172800, runs=runs, scope="your last 5 runs of this job",
    ...                        bound_s=172800, calibrated=False, floor_s=300, risk=0.03))
    suggested --time: your request; your last 5 runs of this job took up to 2.7 h (--time=02:43:00 would have held them), but too few jobs like this one ended that far below their request to promise a shorter limit at 3% risk
    >>> print(suggestion_basis(300, requested_s=60, runs=[45.0] * 5, scope="your last 5 jobs", bound_s=60,
    ...                        calibrated=True, floor_s=300, risk=0.03))
    suggested --time: the site's shortest limit (5.0 min); your last 5 jobs took up to 45 s
    """
    if not runs:
        return None
    needed = runs_limit(runs)
    took = f"{scope} took up to {human(needed)}"
    floor = ceil_minute(floor_s)
    if time_limit_s == floor and floor > ceil_minute(round(max(bound_s, needed), 3)):
        return f"suggested --time: the site's shortest limit ({human(floor)}); {took}"
    if time_limit_s == ceil_minute(round(needed, 3)) and needed >= bound_s:
        return f"suggested --time: what {scope} needed ({human(needed)})"
    if requested_s > 0 and time_limit_s == ceil_minute(requested_s):
        held = max(ceil_minute(round(needed, 3)), floor)
        if held < time_limit_s:
            return (f"suggested --time: your request; {took} (--time={slurm_time(held)} would have held them), but "
                    f"too few jobs like this one ended that far below their request to promise a shorter limit "
                    f"at {risk:.0%} risk")
        return f"suggested --time: your request; {took}"
    if calibrated:
        return f"suggested --time: the walltime model's runtime bound at {risk:.0%} risk ({took})"
    return f"suggested --time: from your recent runs ({took}; without a request, not a promise at {risk:.0%} risk)"
