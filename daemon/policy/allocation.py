"""The one limit hpcpredict may change once Slurm has allocated a job: a TimeLimit it set itself.

At submission, a job without ``--time`` gets the bound as its ``--time`` (``bound`` mode,
:func:`~.limits.plan_limits`). At allocation the estimate is refined (the nodes are known,
more runs may have ended); a site that opts in (the hooks' ``prolog_adjust_time_limit``, which
PrologSlurmctld passes as ``lower_time_limit`` together with job_submit.lua's own ``;limit=auto``
flag) lets the allocation answer lower that limit to the refined suggestion. The daemon decides
here; PrologSlurmctld only guards (a whole number of minutes, below the job's limit, at most
the site cap) and applies it with ``scontrol update``. A user's own ``--time`` is never
touched, nor a ``--time-min`` (a running job's TimeMin cannot be changed anyway).

The rules common to the limits we set apply: nothing from an estimate that is not sane, from a
fallback (no history, no inputs model), from a bound that is not calibrated at the site's risk
(the limit is a kill limit), or in ``advise`` mode. The new limit is the suggestion (the bound,
never below what the user's recent runs needed, at least the site floor) rounded up to a minute,
only when that is below the limit the job has.

>>> plan_allocation_limit(lower_time_limit=True, suggested_s=1000, job_time_limit_s=2400)
LimitChange(time_limit_s=1020, time_min_s=None, reason='allocation_time_limit', mode='bound')
>>> plan_allocation_limit(lower_time_limit=True, suggested_s=2400, job_time_limit_s=2400).reason
'bound_not_below_limit'
>>> plan_allocation_limit(lower_time_limit=False, suggested_s=1000, job_time_limit_s=2400).reason
'not_at_submission'
"""
from __future__ import annotations

from .limits import DEFAULT_FLOOR_S, DEFAULT_SITE_CAP_S, LimitChange, _sane, ceil_minute


def plan_allocation_limit(*, lower_time_limit: bool, suggested_s: float, job_time_limit_s: int,
                          mode: str = "bound", fallback: bool = False, bound_calibrated: bool = True,
                          floor_s: float = DEFAULT_FLOOR_S, site_cap_s: float = DEFAULT_SITE_CAP_S) -> LimitChange:
    """The TimeLimit PrologSlurmctld sets on an allocated job (``time_limit_s``; None: keep).

    ``lower_time_limit``: the job's TimeLimit is job_submit.lua's own and the site lets the
    allocation answer lower it; ``suggested_s``: the refined suggested ``--time``;
    ``job_time_limit_s``: the TimeLimit the job has now (0 = unlimited or not read); ``mode``:
    the policy mode the daemon runs in now."""
    if not lower_time_limit:
        return LimitChange(None, None, "not_at_submission", "advise")
    if mode == "advise":
        return LimitChange(None, None, "advise_only", "advise")
    if not _sane(suggested_s, site_cap_s):
        return LimitChange(None, None, "insane_estimate")
    if fallback:
        return LimitChange(None, None, "fallback")
    if not bound_calibrated:
        return LimitChange(None, None, "bound_not_calibrated")
    if job_time_limit_s <= 0:
        return LimitChange(None, None, "job_limit_unknown")
    limit = max(ceil_minute(suggested_s), ceil_minute(floor_s))
    if limit >= job_time_limit_s:
        return LimitChange(None, None, "bound_not_below_limit")
    return LimitChange(limit, None, "allocation_time_limit")
