"""What hpcpredict does to a job's time limits at submission: one pure function.

On Slurm 22.05 ``--time-min`` is a kill limit: backfill may lower a job's ``--time`` to its
``--time-min`` to start it earlier and then enforces the lowered limit (sbatch(1)). So the
``time_min`` we set is a promise about the job's runtime at the site's risk, never a point
estimate: it is the bound the job outlives with probability at most ``[policy] risk``.

Rules (``slurm_plugin/job_submit.lua`` applies exactly these; a test runs both on one table):

- An estimate that is not sane (not finite, ≤ 0, above the site cap) changes nothing.
- A fallback estimate (no history, no inputs model) changes nothing.
- The user gave ``--time-min`` (with or without ``--time``): nothing changes.
- The user gave ``--time``: ``time_min`` = the bound rounded up to a minute (never below the
  site floor), only when that is below ``--time`` and at most the partition's ``MaxTime``, the
  QOS's ``MaxWall`` and the site cap; otherwise the job is left alone (lowering ``time_min``
  below the bound to fit a maximum would raise the kill risk above the site's target).
- No ``--time``: ``time_limit`` = the bound rounded up to a minute, at least the site floor,
  clamped to the partition's ``MaxTime``, the QOS's ``MaxWall`` and the site cap.

All values are seconds; every limit set is a whole number of minutes (Slurm's unit).

>>> plan_limits(bound_s=1000, requested_s=7200)
LimitChange(time_limit_s=None, time_min_s=1020, reason='time_min')
>>> plan_limits(bound_s=9000, requested_s=7200).reason
'bound_not_below_request'
>>> plan_limits(bound_s=1000, requested_s=0, max_time_s=180)
LimitChange(time_limit_s=180, time_min_s=None, reason='time_limit')
>>> plan_limits(bound_s=float("nan"), requested_s=0).reason
'insane_estimate'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_FLOOR_S = 300               # [policy] min_time_limit_s
DEFAULT_SITE_CAP_S = 366 * 86400    # no limit we set is ever longer than this


@dataclass(frozen=True)
class LimitChange:
    time_limit_s: int | None        # the new --time, or None: keep what the job has
    time_min_s: int | None          # the new --time-min, or None: keep what the job has
    reason: str                     # why: time_min, time_limit, or why nothing changed


def ceil_minute(seconds: float) -> int:
    """Seconds rounded up to whole minutes, at least one minute, in seconds."""
    return int(math.ceil(max(seconds, 1.0) / 60.0)) * 60


def plan_limits(*, bound_s: float, requested_s: float = 0, user_time_min_s: float = 0,
                max_time_s: float | None = None, floor_s: float = DEFAULT_FLOOR_S,
                site_cap_s: float = DEFAULT_SITE_CAP_S, fallback: bool = False,
                set_time_min: bool = True, set_time_limit: bool = True) -> LimitChange:
    """The limits to set for a job whose runtime bound at the site's risk is ``bound_s``.

    ``requested_s``: the user's ``--time`` (0 = none); ``user_time_min_s``: the user's
    ``--time-min`` (0 = none); ``max_time_s``: the smallest of the partition's ``MaxTime``
    and the QOS's ``MaxWall`` (None = unlimited).
    """
    if not (isinstance(bound_s, (int, float)) and math.isfinite(bound_s)) or bound_s <= 0 or bound_s > site_cap_s:
        return LimitChange(None, None, "insane_estimate")
    if fallback:
        return LimitChange(None, None, "fallback")
    if user_time_min_s > 0:
        return LimitChange(None, None, "user_time_min")
    cap = site_cap_s if max_time_s is None or max_time_s <= 0 else min(site_cap_s, max_time_s)
    if requested_s > 0:
        time_min = max(ceil_minute(bound_s), ceil_minute(floor_s))
        if time_min >= requested_s:
            return LimitChange(None, None, "bound_not_below_request")
        if time_min > cap:
            return LimitChange(None, None, "bound_above_max_time")
        if not set_time_min:
            return LimitChange(None, None, "time_min_off")
        return LimitChange(None, time_min, "time_min")
    if not set_time_limit:
        return LimitChange(None, None, "time_limit_off")
    limit = max(ceil_minute(bound_s), ceil_minute(floor_s))
    limit = min(limit, int(cap // 60) * 60)
    if limit < 60:
        return LimitChange(None, None, "cap_below_one_minute")
    return LimitChange(limit, None, "time_limit")
