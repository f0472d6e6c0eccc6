"""What the limits of one ended job were, and whether one of ours killed it (``explain``, ``report``).

Three things are kept apart (the store's columns, :mod:`hpcpredict.daemon.store.rows`):

* **decided**: what the daemon answered — at submission the ``--time-min`` or ``--time``
  job_submit.lua was to set (``decided_time_min_s``/``decided_time_limit_s``), at allocation the
  TimeLimit PrologSlurmctld was to set (a limit the hook set itself, lowered; opt-in);
* **applied**: what slurmctld held when it allocated the job, read back by PrologSlurmctld: its
  TimeMin (``started_time_min_s``: Slurm never changes it, so it is what the hook or the user set);
* **ran under**: the TimeLimit the job started under (``started_time_limit_s``: on 22.05 backfill
  starts a time_min job with its limit lowered, to as little as its TimeMin, whatever the daemon
  called the mode), or the allocation answer's lower one.

A job was **killed by our limit** when it ended ``TIMEOUT`` below its user's ``--time`` (or had
none) and we decided a limit for it. Below the request means: it ran under a limit shorter than
the request, when that was read back; else (hooks older than the read-back) it ended more than a
minute short of the request. A prediction stored before the daemon decided limits (no mode)
counts when its bound was below the request, as before.

>>> killed_by_our_limit(state="TIMEOUT", runtime_s=245, requested_s=1200, ours=True, ran_limit_s=240)
True
>>> killed_by_our_limit(state="TIMEOUT", runtime_s=1205, requested_s=1200, ours=True, ran_limit_s=1200)
False
>>> killed_by_our_limit(state="TIMEOUT", runtime_s=245, requested_s=1200, ours=False, ran_limit_s=240)
False
"""
from __future__ import annotations

import math

#: a runtime this much short of the request is "below it" when the limit was not read back
SHORT_OF_REQUEST_S = 60.0


def _known(value) -> float | None:
    """A stored limit (None, NaN and <= 0: not known) as seconds."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def ran_time_limit_s(started_limit_s, allocation_limit_s) -> float | None:
    """The limit the job ran under: the TimeLimit it started with, or the lower one the
    allocation answer told PrologSlurmctld to set; None when neither is known."""
    known = [s for s in (_known(started_limit_s), _known(allocation_limit_s)) if s is not None]
    return min(known) if known else None


def lowered_at_start(started_limit_s, submitted_limit_s) -> bool | None:
    """Whether Slurm started the job under a shorter TimeLimit than it was submitted with
    (backfill's time_min start); None when either is not known."""
    started, submitted = _known(started_limit_s), _known(submitted_limit_s)
    return None if started is None or submitted is None else started < submitted


def ours(*, decided_time_min_s=None, decided_time_limit_s=None, allocation_time_limit_s=None, policy_mode="",
         bound_s=None, requested_s=0.0, fallback=True) -> bool:
    """Whether we decided a limit for the job (see the module doc for older predictions)."""
    if any(_known(value) is not None for value in (decided_time_min_s, decided_time_limit_s, allocation_time_limit_s)):
        return True
    if policy_mode:         # the daemon decided, and decided nothing
        return False
    bound, requested = _known(bound_s), _known(requested_s)
    return bound is not None and not fallback and (requested is None or bound < requested)


def killed_by_our_limit(*, state: str, runtime_s: float, requested_s, ours: bool, ran_limit_s) -> bool:
    """See the module doc."""
    if state != "TIMEOUT" or not ours:
        return False
    requested = _known(requested_s)
    if requested is None:
        return True         # the user gave no --time: the limit was the hook's
    ran = _known(ran_limit_s)
    if ran is not None:
        return ran < requested
    return float(runtime_s) < requested - SHORT_OF_REQUEST_S
