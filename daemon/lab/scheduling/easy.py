"""EASY backfilling (Mu'alem and Feitelson 2001) with the ``--time-min`` semantics of a Slurm release.

One event loop over submissions and job ends; after the events of each instant one
scheduling pass:

1. FCFS: start jobs from the head of the queue while they fit, each with its full limit.
2. The first job that does not fit (the head) gets the one reservation: the *shadow time*,
   when enough processors will be free for it if every running job runs to its limit, and the
   *extra* processors, those free then beyond what the head needs.
3. Backfill: every later job (queue order) that fits now starts if it does not delay the
   head: it ends before the shadow time with its limit, or it uses only extra processors
   (which then shrink).

``--time-min`` as Slurm's backfill applies it (``src/plugins/sched/backfill/backfill.c``): a
job whose ``time_min`` is below its limit is tested with ``time_min`` as its limit; if it can
start now it starts, and what it then runs under depends on the release (``slurm``) and on
``SchedulerParameters=time_min_as_soft_limit`` (``soft_limit``; Slurm >= 23.11, on by default
for the releases that have it, since that is hpcpredict's main path):

- ``"22.05"`` (what our 22.05 test cluster runs and ``tests/slurm/test_sched_replay.py``
  checks): ``time_min`` itself, a kill limit. 22.05's backfill sets ``time_limit =
  job_ptr->time_limit = job_ptr->time_min; comp_time_limit = time_limit``, so
  ``_reset_job_time_limit`` can only return ``time_min``, even where the full limit would have
  fitted. The main scheduler (step 1) never lowers a limit.
- ``"24.11"`` (23.02 to 25.05.2) without the option: every job with a ``time_min`` runs under
  exactly it, also one that fits at the head: the backfill thread starts such jobs before the
  main scheduler and gives them their ``time_min`` (measured on 24.11.5, FINDINGS S7/S7b;
  SchedMD ticket 23350, fixed in 25.05.3).
- ``"25.05"`` (>= 25.05.3) without the option: the full limit, lowered by
  ``_reset_job_time_limit`` to the whole minutes left before the first reservation the job
  overlaps (``(begin_time - now) / 60``), never below ``time_min``.
- ``"24.11"`` or ``"25.05"`` with ``time_min_as_soft_limit``: the job is *started* by the
  ``time_min`` test and keeps its full limit (never killed before it). Once running it is
  planned at its *hard* end for every other job: Slurm restores ``time_limit`` and
  ``end_time`` right after the start and a pending job's start comes from the select
  plugin's will-run test, which frees running jobs at ``end_time`` (measured on 24.11.5:
  the head's StartTime jumped to the soft job's start + its ``--time``, FINDINGS S1/S3).
  Only within the pass that starts it is it counted to its ``time_min``
  (``_bf_reserve_running`` right after the start): it takes no extra processors when its
  ``time_min`` ends before the reservation. So every soft job moves the head's reservation to
  its hard end, and backfill fills the window it opened.

Reservations start on the backfill resolution (start rounded down to ``bf_resolution``, 60 s
by default), and a job conflicts with a reservation that begins at or before its end
(``node_space[j].begin_time <= end_time``).

With ``resubmit_killed`` a job that a limit below its user's request killed is submitted again
at its kill time with the user's request and no ``time_min`` (:meth:`SimJob.resubmission`):
its lost run occupied the machine and the retry queues like any new job. Without it (the
default) a killed job is simply done at its kill, as if its cut run were all it needed.

Where this differs from Slurm (say so when comparing): Slurm reserves for every pending job
it tests (bf_max_job_test), not only the head; it places jobs on nodes (a job may take
reserved nodes and be cut although extra processors existed); it schedules every
``bf_interval`` seconds and notices time-outs up to 30 s late. Here processors are
interchangeable, passes run at every event and a job ends at its limit exactly. On 22.05 the
backfill thread can also start a job that fits at the head before the main scheduler does
(22.05 then gives it its ``time_min`` too): ``"24.11"`` without the option bounds that case.

>>> from hpcpredict.daemon.lab.scheduling.workload import SimJob
>>> jobs = [SimJob(0, "a", 0, 2, 600, 600, 600), SimJob(1, "b", 1, 4, 60, 600, 600),
...         SimJob(2, "c", 2, 2, 900, 3600, 3600, time_min_s=120)]
>>> [(o.job.job_id, o.start_s, o.limit_s, o.killed) for o in simulate(jobs, procs=4, slurm="22.05")]
[('a', 0, 600, False), ('c', 2, 120, True), ('b', 600, 600, False)]
>>> [o.limit_s for o in simulate(jobs, procs=4, slurm="25.05", soft_limit=False)]
[600, 540, 600]
>>> [(o.job.job_id, o.start_s, o.limit_s, o.killed) for o in simulate(jobs, procs=4, slurm="24.11")]
[('a', 0, 600, False), ('c', 2, 3600, False), ('b', 902, 600, False)]
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Iterable

from .workload import SimJob

SLURM_BF_RESOLUTION_S = 60    # Slurm's default bf_resolution
SLURM_RELEASES = ("22.05", "24.11", "25.05")
SOFT_LIMIT_SINCE = "24.11"    # the oldest modelled release with time_min_as_soft_limit (23.11)
# What a job with a time_min below its limit runs under once started (see above):
_BACKFILL_TIME_MIN = "backfill-time-min"   # 22.05: a backfill start runs under its time_min
_ANY_TIME_MIN = "any-time-min"             # 24.11 without the option: every start does
_RESERVATION = "reservation"               # 25.05.3 without the option: the room before the reservation
_SOFT = "soft"                             # with the option: its full limit, planned at its hard end
_END, _SUBMIT = 0, 1          # at one instant, ends free processors before submissions look


def semantics(slurm: str, soft_limit: bool | None = None) -> str:
    """What a started ``time_min`` job runs under on release ``slurm``; ``soft_limit`` says
    whether ``time_min_as_soft_limit`` is set (None: set where the release has it)."""
    if slurm not in SLURM_RELEASES:
        raise ValueError(f"slurm must be one of {', '.join(SLURM_RELEASES)}, got {slurm!r}")
    has_option = SLURM_RELEASES.index(slurm) >= SLURM_RELEASES.index(SOFT_LIMIT_SINCE)
    if soft_limit and not has_option:
        raise ValueError(f"Slurm {slurm} has no time_min_as_soft_limit (it came with 23.11)")
    if has_option if soft_limit is None else soft_limit:
        return _SOFT
    return {"22.05": _BACKFILL_TIME_MIN, "24.11": _ANY_TIME_MIN, "25.05": _RESERVATION}[slurm]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one job in a replay."""

    job: SimJob
    start_s: float
    end_s: float
    limit_s: float          # the limit it ran under (lowered by backfill or not)
    killed: bool            # its limit stopped it before its work was done
    backfilled: bool        # started past an earlier job still waiting

    @property
    def lowered(self) -> bool:
        return self.limit_s < self.job.limit_s


@dataclass(slots=True)
class _Running:
    job: SimJob
    start_s: float
    limit_s: float

    @property
    def planned_end(self) -> float:
        """When the scheduler expects it to end: its limit (a soft job's hard one)."""
        return self.start_s + self.limit_s


def simulate(jobs: Iterable[SimJob], procs: int, resolution_s: float = SLURM_BF_RESOLUTION_S,
             slurm: str = SOFT_LIMIT_SINCE, soft_limit: bool | None = None,
             resubmit_killed: bool = False) -> list[Outcome]:
    """Replay ``jobs`` on ``procs`` processors; one :class:`Outcome` per job, in start order.

    ``resolution_s``: reservation start times are rounded down to it (Slurm's
    ``bf_resolution``; 0 = exact, plain EASY). ``slurm`` and ``soft_limit``: the release and
    whether ``time_min_as_soft_limit`` is set (None: where the release has it; see above).
    ``resubmit_killed``: a job killed below its user's request is submitted again at its kill
    (one more outcome, whose ``job.retry_of`` is the killed job's ``seq``)."""
    if procs <= 0:
        raise ValueError(f"machine size must be positive, got {procs}")
    mode = semantics(slurm, soft_limit)
    ordered = sorted(jobs, key=lambda j: (j.submit_s, j.seq))
    for job in ordered:
        if not 0 < job.procs <= procs:
            raise ValueError(f"job {job.job_id} needs {job.procs} processors of {procs}")
    events: list[tuple[float, int, int, SimJob]] = [(j.submit_s, _SUBMIT, j.seq, j) for j in ordered]
    heapq.heapify(events)
    state = _Machine(procs, resolution_s, mode)
    next_seq = max((j.seq for j in ordered), default=-1) + 1
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, seq, job = heapq.heappop(events)
            if kind == _END:
                state.free += job.procs
                del state.running[seq]
            else:
                state.queue.append(job)
        for outcome in state.schedule(now):
            heapq.heappush(events, (outcome.end_s, _END, outcome.job.seq, outcome.job))
            if resubmit_killed and outcome.killed and outcome.limit_s < outcome.job.request_limit_s:
                # the user's own request never ends in a retry: only a limit we set below it
                retry = outcome.job.resubmission(next_seq, outcome.end_s)
                heapq.heappush(events, (outcome.end_s, _SUBMIT, next_seq, retry))
                next_seq += 1
    return state.outcomes


class _Machine:
    def __init__(self, procs: int, resolution_s: float, mode: str):
        self.procs, self.free, self.resolution_s, self.mode = procs, procs, resolution_s, mode
        self.queue: list[SimJob] = []
        self.running: dict[int, _Running] = {}
        self.outcomes: list[Outcome] = []

    def _start(self, job: SimJob, now: float, limit: float, backfilled: bool) -> Outcome:
        self.free -= job.procs
        self.running[job.seq] = _Running(job, now, limit)
        run = min(job.work_s, limit)
        outcome = Outcome(job, now, now + run, limit, job.work_s > limit, backfilled)
        self.outcomes.append(outcome)
        return outcome

    def _reservation(self, head: SimJob, now: float) -> tuple[float, int]:
        """(shadow time rounded down to the resolution, extra processors) for the head job."""
        available = self.free
        ends = sorted((r.planned_end, r.job.procs) for r in self.running.values())
        shadow = now
        for index, (end, size) in enumerate(ends):
            available += size
            if available >= head.procs and (index + 1 == len(ends) or ends[index + 1][0] > end):
                shadow = end
                break
        if self.resolution_s > 0:
            shadow = math.floor(shadow / self.resolution_s) * self.resolution_s
        return max(shadow, now), available - head.procs

    def schedule(self, now: float) -> list[Outcome]:
        started = []
        while self.queue and self.queue[0].procs <= self.free:      # FCFS
            job = self.queue.pop(0)
            limit = job.limit_s
            if self.mode == _ANY_TIME_MIN and 0 < job.time_min_s < limit:
                limit = job.time_min_s
            started.append(self._start(job, now, limit, backfilled=False))
        if len(self.queue) < 2 or self.free == 0:
            return started
        shadow, extra = self._reservation(self.queue[0], now)
        waiting = [self.queue[0]]
        for index in range(1, len(self.queue)):
            job = self.queue[index]
            if self.free == 0:
                waiting.extend(self.queue[index:])
                break
            outcome = self._backfill(job, now, shadow, extra) if job.procs <= self.free else None
            if outcome is None:
                waiting.append(job)
                continue
            started.append(outcome)
            if outcome.start_s + self._planned(outcome) >= shadow:   # runs into the reservation
                extra -= job.procs
        self.queue = waiting
        return started

    def _planned(self, outcome: Outcome) -> float:
        """How long the pass that starts a job counts it: a soft job to its time_min."""
        job = outcome.job
        return job.time_min_s if self.mode == _SOFT and 0 < job.time_min_s < job.limit_s else outcome.limit_s

    def _backfill(self, job: SimJob, now: float, shadow: float, extra: int) -> Outcome | None:
        """Start ``job`` now if it does not delay the head's reservation (None otherwise)."""
        time_min = job.time_min_s if 0 < job.time_min_s < job.limit_s else 0.0
        if time_min and self.mode in (_BACKFILL_TIME_MIN, _ANY_TIME_MIN):
            if now + time_min < shadow or job.procs <= extra:
                return self._start(job, now, time_min, backfilled=True)
            return None
        if now + job.limit_s < shadow or job.procs <= extra:
            return self._start(job, now, job.limit_s, backfilled=True)
        if not time_min or now + time_min >= shadow:
            return None
        if self.mode == _SOFT:
            return self._start(job, now, job.limit_s, backfilled=True)
        minutes_left = math.floor((shadow - now) / 60) * 60       # _reset_job_time_limit
        return self._start(job, now, max(time_min, min(job.limit_s, minutes_left)), backfilled=True)
