"""What hpcpredict does to a job's time limits at submission: one pure function, three modes.

The daemon decides with :func:`plan_limits` and answers the limits; ``slurm_plugin/job_submit.lua``
only guards them (finite, whole minutes, never above ``--time`` or the partition maximum) and
applies them. What a limit we set does depends on the controller:

- ``soft``: Slurm >= 23.11 with ``SchedulerParameters=time_min_as_soft_limit``. Backfill may
  start a job on its ``--time-min`` and the job keeps its ``--time``: a soft ``time_min`` never
  kills, so it is the runtime the job outlives with probability ``[policy] soft_risk`` for the
  controller's planning rule (the daemon passes it as ``runtime_s``; no floor). ``--time`` is
  never touched. What it costs is the reservation of the job it could delay (below).
- ``bound``: ``--time-min`` is a kill limit (22.05; 24.11 without the option, where backfill
  gives every job it starts exactly its ``--time-min``). The ``time_min`` we set is then a
  promise at the site's risk, never a point estimate: the bound the job outlives with
  probability at most ``[policy] risk``. Opt-in: a site that accepts that risk.
- ``advise``: no limit changes; the user still gets the suggested ``--time``.

Rules common to ``soft`` and ``bound``: an estimate that is not sane (not finite, ≤ 0, above the
site cap), a fallback estimate (no history, no inputs model) or a user's own ``--time-min``
changes nothing.

``bound``: the user gave ``--time``: ``time_min`` = the bound rounded up to a minute (never
below the site floor), only when that is below ``--time`` and at most the partition's
``MaxTime``, the QOS's ``MaxWall`` and the site cap; otherwise the job is left alone (lowering
``time_min`` below the bound to fit a maximum would raise the kill risk above the site's target).
No ``--time``: ``time_limit`` = the bound rounded up to a minute, at least the site floor,
clamped to the partition's ``MaxTime``, the QOS's ``MaxWall`` and the site cap.

``soft``: ``time_min`` = ``runtime_s`` rounded up to a minute, only when below the job's limit
(``requested_s``: its ``--time``, or the partition's ``DefaultTime`` the caller passes when none
was given; with neither, ``max_time_s``; with none known, nothing), and only when the slip it
can cause a waiting job's reservation is within ``soft_max_slip_s`` (:func:`reservation_slip_s`).

Why a soft job costs a reservation, per planning rule (``rule``). Backfill starts a soft job J
(width w of the machine's M CPUs, soft value t, hard limit T) in a hole before the head's
reservation because it fits there *by t*. What happens to that reservation then is the rule's:

- ``hard_end`` (23.11.0 - 25.05.3, measured on 24.11.5): from the next pass J is planned at its
  hard end, whether or not it will overrun: the head's reservation, if it waits for J's CPUs,
  moves from ``start + t`` to ``start + T`` at once, and backfill fills the window it opened
  with jobs the head then waits for too (FINDINGS S3: 316 s late for a 38 s overrun). The
  window is ``T - t``; the soft value only decides the admission.
- ``soft_then_halfway`` (25.05.4+, 25.11, 26.x, measured on 26.05.5): J is planned at
  ``start + t``; the reservation holds while J is within it. Only once J outlives t (with
  probability ``soft_risk``, the soft value's risk) is it planned halfway from now to its hard
  end: the window opened at that pass is ``(T - t) / 2``, and it shrinks by half of each second
  that passes. So the expected window is ``soft_risk (T - t) / 2``. The soft value is the plan
  here, so it may be closer to the median: an overrun costs its own length and half a window,
  not the whole one.

How much of that window reaches a waiting job: J holds w of M CPUs, and the work queued in
front of a wide job drains at the machine's rate, so a window of W seconds on w CPUs is, spread
over the machine, ``(w / M) W`` seconds of delay in front of the head (the fluid view of EASY:
wide jobs wait for the machine, not for one job). :func:`reservation_slip_s` is that product
(with the expected window); a soft ``time_min`` is set only where it is at most
``soft_max_slip_s``, one budget for both rules. This bounds, per soft job
and by construction, what it can do to the widest jobs' reservations (an unknown width or
machine size counts as the whole machine: w / M = 1), instead of a quantile tuned to one trace.
A narrow job with a generous ``--time`` keeps its soft limit; a wide one over-requesting by
hours does not. ``soft_max_ratio`` (k > 0, off by default) is the older, width-blind guard:
``--time`` at most k × the estimate.

All values are seconds; every limit set is a whole number of minutes (Slurm's unit).

>>> plan_limits(bound_s=1000, requested_s=7200)
LimitChange(time_limit_s=None, time_min_s=1020, reason='time_min', mode='bound')
>>> plan_limits(bound_s=9000, requested_s=7200).reason
'bound_not_below_request'
>>> plan_limits(bound_s=1000, requested_s=0, max_time_s=180)
LimitChange(time_limit_s=180, time_min_s=None, reason='time_limit', mode='bound')
>>> plan_limits(bound_s=float("nan"), requested_s=0).reason
'insane_estimate'
>>> plan_limits(mode="soft", runtime_s=130, bound_s=1000, requested_s=14400)
LimitChange(time_limit_s=None, time_min_s=180, reason='soft_time_min', mode='soft')
>>> plan_limits(mode="soft", runtime_s=130, bound_s=1000, requested_s=14400, soft_max_ratio=10).reason
'limit_above_soft_max_ratio'
>>> plan_limits(mode="soft", runtime_s=130, bound_s=1000).reason
'job_limit_unknown'
>>> plan_limits(mode="soft", runtime_s=130, bound_s=1000, requested_s=14400, soft_max_slip_s=1800).reason
'reservation_slip_above_budget'
>>> plan_limits(mode="soft", runtime_s=130, bound_s=1000, requested_s=14400, soft_max_slip_s=1800,
...             procs=8, machine_procs=100).time_min_s
180
>>> plan_limits(mode="advise", runtime_s=130, bound_s=1000, requested_s=14400)
LimitChange(time_limit_s=None, time_min_s=None, reason='advise_only', mode='advise')
"""
from __future__ import annotations

import math
from dataclasses import dataclass

MODES = ("soft", "bound", "advise")
DEFAULT_FLOOR_S = 300               # [policy] min_time_limit_s
DEFAULT_SITE_CAP_S = 366 * 86400    # no limit we set is ever longer than this


@dataclass(frozen=True)
class LimitChange:
    time_limit_s: int | None        # the new --time, or None: keep what the job has
    time_min_s: int | None          # the new --time-min, or None: keep what the job has
    reason: str                     # why: what was set (time_min, time_limit, soft_time_min) or why nothing was
    mode: str = "bound"             # the mode that decided


def ceil_minute(seconds: float) -> int:
    """Seconds rounded up to whole minutes, at least one minute, in seconds."""
    return int(math.ceil(max(seconds, 1.0) / 60.0)) * 60


def within_max_time(suggested_s: int, max_time_s: float, partition: str = "") -> tuple[int, str]:
    """The suggested ``--time`` no longer than the job's partition allows (``max_time_s``: the
    smallest of its partitions' MaxTime and its QOS's MaxWall, 0 = unlimited): Slurm refuses a
    longer one. (suggestion, the line saying so; "" when nothing was cut.)

    >>> within_max_time(300, 180, "short")
    (180, 'suggested --time capped at 00:03:00, the most partition short allows (MaxTime/QOS MaxWall): the job would need 00:05:00 and may be killed there')
    >>> within_max_time(120, 180)
    (120, '')
    """
    from ..timefmt import slurm_time

    if not max_time_s or suggested_s <= max_time_s:
        return suggested_s, ""
    limit = max(60, int(max_time_s // 60) * 60)
    where = f"partition {partition}" if partition else "the job's partition"
    return limit, (f"suggested --time capped at {slurm_time(limit)}, the most {where} allows (MaxTime/QOS "
                   f"MaxWall): the job would need {slurm_time(suggested_s)} and may be killed there")


def _sane(seconds: float, site_cap_s: float) -> bool:
    return isinstance(seconds, (int, float)) and math.isfinite(seconds) and 0 < seconds <= site_cap_s


def plan_limits(*, mode: str = "bound", runtime_s: float = 0.0, bound_s: float, requested_s: float = 0,
                user_time_min_s: float = 0, max_time_s: float | None = None, floor_s: float = DEFAULT_FLOOR_S,
                site_cap_s: float = DEFAULT_SITE_CAP_S, fallback: bool = False,
                soft_max_ratio: float = 0.0, bound_calibrated: bool = True, rule: str = "hard_end",
                procs: int = 0, machine_procs: int = 0, soft_max_slip_s: float = 0.0,
                soft_risk: float = 1.0) -> LimitChange:
    """The limits to set for a job estimated to run ``runtime_s``, ``bound_s`` at the site's risk.

    ``runtime_s`` is only read in ``soft`` mode: the runtime the soft ``time_min`` plans with
    (the daemon and the scheduling replay pass the estimate at ``[policy] soft_risk``).
    ``requested_s``: the user's ``--time`` (0 = none; in ``soft`` mode the caller may pass the
    partition's ``DefaultTime`` instead: the limit the job will run with); ``user_time_min_s``:
    the user's ``--time-min`` (0 = none); ``max_time_s``: the smallest of the partition's
    ``MaxTime`` and the QOS's ``MaxWall`` (None = unlimited). ``soft_max_ratio``: 0 = no guard.
    ``bound_calibrated``: whether ``bound_s`` holds at the risk (``RuntimeEstimate.bound_calibrated``):
    ``bound`` mode sets a kill limit only from such a bound.
    ``rule``: how the controller plans a running soft job (``hard_end``: 23.11 - 25.05.3;
    ``soft_then_halfway``: 25.05.4+; :class:`~.controller.ControllerFacts`); ``procs``: the
    job's CPUs requested; ``machine_procs``: the cluster's CPUs (0 = unknown);
    ``soft_max_slip_s``: the most a soft job may be expected to slip a waiting reservation
    (:func:`reservation_slip_s`; 0 = no guard); ``soft_risk``: the probability the job outlives
    ``runtime_s`` (the soft value's risk; 1 = unknown, the worst case). Read in ``soft`` mode only.
    """
    if mode not in MODES:
        raise ValueError(f"unknown policy mode {mode!r}: one of {', '.join(MODES)}")
    if mode == "advise":
        return LimitChange(None, None, "advise_only", mode)
    estimate_s = runtime_s if mode == "soft" else bound_s
    if not _sane(estimate_s, site_cap_s):
        return LimitChange(None, None, "insane_estimate", mode)
    if fallback:
        return LimitChange(None, None, "fallback", mode)
    if user_time_min_s > 0:
        return LimitChange(None, None, "user_time_min", mode)
    if mode == "bound" and not bound_calibrated:
        return LimitChange(None, None, "bound_not_calibrated", mode)
    cap = site_cap_s if max_time_s is None or max_time_s <= 0 else min(site_cap_s, max_time_s)
    if mode == "soft":
        return _plan_soft(runtime_s, requested_s, max_time_s, cap, soft_max_ratio,
                          rule=rule, procs=procs, machine_procs=machine_procs, soft_max_slip_s=soft_max_slip_s,
                          soft_risk=soft_risk)
    if requested_s > 0:
        time_min = max(ceil_minute(bound_s), ceil_minute(floor_s))
        if time_min >= requested_s:
            return LimitChange(None, None, "bound_not_below_request")
        if time_min > cap:
            return LimitChange(None, None, "bound_above_max_time")
        return LimitChange(None, time_min, "time_min")
    limit = max(ceil_minute(bound_s), ceil_minute(floor_s))
    limit = min(limit, int(cap // 60) * 60)
    if limit < 60:
        return LimitChange(None, None, "cap_below_one_minute")
    return LimitChange(limit, None, "time_limit")


def reservation_slip_s(job_limit_s: float, time_min_s: float, rule: str, procs: int = 0,
                       machine_procs: int = 0, soft_risk: float = 1.0) -> float:
    """How far, spread over the machine, a running soft job is expected to push a waiting
    reservation (module docstring): the window its planning rule opens (``hard_end``: ``--time``
    − ``time_min``, at its start, overrun or not; ``soft_then_halfway``: half that, and only if it
    outlives ``time_min``, with probability ``soft_risk``) times its share of the machine (1 when
    either size is unknown).

    >>> reservation_slip_s(14400, 1800, "hard_end", 8, 100), reservation_slip_s(14400, 1800, "soft_then_halfway")
    (1008.0, 6300.0)
    >>> reservation_slip_s(14400, 1800, "soft_then_halfway", 8, 100, soft_risk=0.5)
    252.0
    """
    window = max(job_limit_s - time_min_s, 0.0)
    if rule == "soft_then_halfway":
        window *= min(max(soft_risk, 0.0), 1.0) / 2.0
    share = min(procs / machine_procs, 1.0) if procs > 0 and machine_procs > 0 else 1.0
    return share * window


def _plan_soft(runtime_s: float, requested_s: float, max_time_s: float | None, cap: float,
               soft_max_ratio: float, *, rule: str = "hard_end", procs: int = 0,
               machine_procs: int = 0, soft_max_slip_s: float = 0.0, soft_risk: float = 1.0) -> LimitChange:
    # No floor: a soft time_min cannot kill; runtime_s is the plan (the soft_risk quantile).
    known = [s for s in (requested_s, max_time_s) if s is not None and 0 < s]
    if not known:
        return LimitChange(None, None, "job_limit_unknown", "soft")
    job_limit = min(known[0], cap)
    time_min = ceil_minute(runtime_s)
    if time_min >= job_limit:
        return LimitChange(None, None, "estimate_not_below_limit", "soft")
    if soft_max_ratio > 0 and job_limit > soft_max_ratio * runtime_s:
        return LimitChange(None, None, "limit_above_soft_max_ratio", "soft")
    slip = reservation_slip_s(job_limit, time_min, rule, procs, machine_procs, soft_risk)
    if soft_max_slip_s > 0 and slip > soft_max_slip_s:
        # the window this job's rule opens in a waiting reservation, spread over the machine
        return LimitChange(None, None, "reservation_slip_above_budget", "soft")
    return LimitChange(None, time_min, "soft_time_min", "soft")


def user_line(change: LimitChange, *, runtime_s: float, low_s: float = 0.0, high_s: float = 0.0,
              coverage: float = 0.0, bound_s: float, risk: float = 0.0, requested_s: float = 0,
              job_limit_s: float = 0, fallback: bool = False, floor_s: float = DEFAULT_FLOOR_S) -> str:
    """What the user reads at submission (sbatch's stderr), saying what the limits set will do.

    ``requested_s``: the user's ``--time`` (0 = none, ``inf`` = UNLIMITED); ``job_limit_s``:
    the limit a job without ``--time`` gets (the partition's, 0 = unknown).

    >>> soft = plan_limits(mode="soft", runtime_s=2500, bound_s=4000, requested_s=14400)
    >>> user_line(soft, runtime_s=2500, bound_s=4000, requested_s=14400)
    'predicted runtime 41.7 min; set --time-min=00:42:00 as a soft limit: planned with 42 min, never stopped before your --time=04:00:00'
    >>> advise = plan_limits(mode="advise", runtime_s=2500, bound_s=4000, requested_s=14400)
    >>> user_line(advise, runtime_s=2500, bound_s=4000, requested_s=14400)
    'predicted runtime 41.7 min; kept your --time=04:00:00, suggested --time=01:07:00 (advice only: hpcpredict changes no limit here)'
    >>> same = plan_limits(mode="advise", runtime_s=2500, bound_s=14400, requested_s=14400)
    >>> user_line(same, runtime_s=2500, bound_s=14400, requested_s=14400)
    'predicted runtime 41.7 min; kept your --time=04:00:00 (the suggestion; advice only: hpcpredict changes no limit here)'
    """
    from ..timefmt import human, slurm_time

    said = f"predicted runtime {human(runtime_s)}"
    if math.isfinite(high_s) and high_s > low_s > 0:
        kind = f"{round(coverage * 100)}% interval" if coverage > 0 else "range of recent runs"
        said += f" ({human(low_s)} - {human(high_s)}, {kind})"
    at_risk = f" at {risk * 100:g}% risk" if math.isfinite(risk) and risk > 0 else ""
    asked = 0 < requested_s < math.inf
    if change.time_min_s and change.mode == "soft":
        limit = (f"your --time={slurm_time(requested_s)}" if asked else "UNLIMITED" if requested_s else
                 f"the partition's time limit {slurm_time(job_limit_s)}" if job_limit_s else "the partition's time limit")
        planned = f"{change.time_min_s // 60} min" if change.time_min_s < 7200 else human(change.time_min_s)
        said += (f"; set --time-min={slurm_time(change.time_min_s)} as a soft limit: planned with "
                 f"{planned}, never stopped before {limit}")
    elif change.time_min_s:
        said += (f"; set --time-min={slurm_time(change.time_min_s)} (runtime bound{at_risk}): backfill may start the "
                 f"job early with its limit lowered to no less than that")
        if asked:
            said += f", otherwise your --time={slurm_time(requested_s)} holds"
    elif change.time_limit_s:
        said += f"; no --time given, set --time={slurm_time(change.time_limit_s)}"
        clamped = change.time_limit_s < max(ceil_minute(bound_s), ceil_minute(floor_s))
        said += " (the partition/QOS maximum)" if clamped else f" (runtime bound{at_risk})"
    elif change.mode == "advise":
        if asked and slurm_time(requested_s) == slurm_time(bound_s):    # said once: the request is the suggestion
            said += f"; kept your --time={slurm_time(requested_s)} (the suggestion; advice only: "
        else:
            said += (f"; kept your --time={slurm_time(requested_s)}, " if asked else "; ") + \
                f"suggested --time={slurm_time(bound_s)} (advice only: "
        said += "hpcpredict changes no limit here)"
    elif change.reason == "bound_not_calibrated":
        said += (f"; kept your --time={slurm_time(requested_s)}, set no --time-min" if asked else
                 f"; set no --time (suggested --time={slurm_time(bound_s)})") + \
            f": no calibrated runtime bound{at_risk} for this job yet"
    elif asked:
        said += f"; kept your --time={slurm_time(requested_s)}"
    else:
        said += f"; suggested --time={slurm_time(bound_s)}"
    if fallback:
        said += " [no history yet]"
    return said
