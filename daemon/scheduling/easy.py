"""EASY backfilling (Mu'alem and Feitelson 2001) with Slurm's ``--time-min`` semantics.

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
start now it starts, and its limit is then

- ``SLURM_22_05`` (the default; what our test cluster runs and what
  ``tests/slurm/test_sched_replay.py`` checks): ``time_min`` itself. 22.05's backfill sets
  ``time_limit = job_ptr->time_limit = job_ptr->time_min; comp_time_limit = time_limit``, so
  ``_reset_job_time_limit`` can only return ``time_min``: every job backfill starts on a
  ``time_min`` runs under it, even where its full limit would have fitted.
- ``RESERVATION`` (Slurm's current source, where ``comp_time_limit`` keeps the full limit;
  which release changed it was not checked): the full limit,
  lowered by ``_reset_job_time_limit`` to the whole minutes left before the first
  reservation the job overlaps (``(begin_time - now) / 60``), never below ``time_min``.

- ``ANY_START``: as ``SLURM_22_05``, and the jobs the FCFS step starts run under their
  ``time_min`` too. On 22.05 the backfill thread often starts a job that fits at the head
  before the main scheduler does (the test cluster shows both), and then gives it its
  ``time_min``: this is the worst case of that race.

Reservations start on the backfill resolution (start rounded down to ``bf_resolution``, 60 s
by default), and a job conflicts with a reservation that begins at or before its end
(``node_space[j].begin_time <= end_time``). The main scheduler (step 1) never lowers a limit (except in ``ANY_START``).

A *soft* ``time_min`` (what Slurm >= 23.11 names ``time_min_as_soft_limit``) is modelled as:
the same backfill test with ``time_min``, but the job keeps its full limit (never killed
before its request), and reservations assume it ends at ``time_min``, or, once past it,
halfway between now and its limit (``_bf_reserve_running``). Our Slurm test cluster is 22.05:
that variant is not validated against a real Slurm.

With ``resubmit_killed`` a job that a limit below its user's request killed is submitted again
at its kill time with the user's request and no ``time_min`` (:meth:`SimJob.resubmission`):
its lost run occupied the machine and the retry queues like any new job. Without it (the
default) a killed job is simply done at its kill, as if its cut run were all it needed.

Where this differs from Slurm (say so when comparing): Slurm reserves for every pending job
it tests (bf_max_job_test), not only the head; it places jobs on nodes (a job may take
reserved nodes and be cut although extra processors existed); it schedules every
``bf_interval`` seconds and notices time-outs up to 30 s late. Here processors are
interchangeable, passes run at every event and a job ends at its limit exactly. Slurm's
backfill thread can also start a job that fits at the head of the queue before the main
scheduler does (22.05 then gives it its ``time_min`` too): ``ANY_START`` bounds that case.

>>> from hpcpredict.daemon.scheduling.workload import SimJob
>>> jobs = [SimJob(0, "a", 0, 2, 600, 600, 600), SimJob(1, "b", 1, 4, 60, 600, 600),
...         SimJob(2, "c", 2, 2, 900, 3600, 3600, time_min_s=120)]
>>> [(o.job.job_id, o.start_s, o.limit_s, o.killed) for o in simulate(jobs, procs=4)]
[('a', 0, 600, False), ('c', 2, 120, True), ('b', 600, 600, False)]
>>> [o.limit_s for o in simulate(jobs, procs=4, time_min_limit=RESERVATION)]
[600, 540, 600]
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Iterable

from .workload import SimJob

SLURM_BF_RESOLUTION_S = 60    # Slurm's default bf_resolution
SLURM_22_05, RESERVATION = "time_min", "reservation"   # what a backfilled time_min job runs under
ANY_START = "any-start"       # 22.05 at worst: its backfill thread starts every job, even the head
_END, _SUBMIT = 0, 1          # at one instant, ends free processors before submissions look


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

    def planned_end(self, now: float) -> float:
        """When the scheduler expects it to end (its limit; for a soft time_min, Slurm's guess)."""
        hard = self.start_s + self.limit_s
        if not self.job.soft_time_min or not self.job.time_min_s:
            return hard
        soft = self.start_s + self.job.time_min_s
        return soft if soft >= now else now + (hard - now) / 2


def simulate(jobs: Iterable[SimJob], procs: int, resolution_s: float = SLURM_BF_RESOLUTION_S,
             time_min_limit: str = SLURM_22_05, resubmit_killed: bool = False) -> list[Outcome]:
    """Replay ``jobs`` on ``procs`` processors; one :class:`Outcome` per job, in start order.

    ``resolution_s``: reservation start times are rounded down to it (Slurm's
    ``bf_resolution``; 0 = exact, plain EASY). ``time_min_limit``: the limit of a job that
    backfill starts on its time_min (``SLURM_22_05`` or ``RESERVATION``, see above).
    ``resubmit_killed``: a job killed below its user's request is submitted again at its kill
    (one more outcome, whose ``job.retry_of`` is the killed job's ``seq``)."""
    if procs <= 0:
        raise ValueError(f"machine size must be positive, got {procs}")
    if time_min_limit not in (SLURM_22_05, RESERVATION, ANY_START):
        raise ValueError(f"time_min_limit must be {SLURM_22_05!r}, {RESERVATION!r} or {ANY_START!r}, "
                         f"got {time_min_limit!r}")
    ordered = sorted(jobs, key=lambda j: (j.submit_s, j.seq))
    for job in ordered:
        if not 0 < job.procs <= procs:
            raise ValueError(f"job {job.job_id} needs {job.procs} processors of {procs}")
    events: list[tuple[float, int, int, SimJob]] = [(j.submit_s, _SUBMIT, j.seq, j) for j in ordered]
    heapq.heapify(events)
    state = _Machine(procs, resolution_s, time_min_limit)
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
    def __init__(self, procs: int, resolution_s: float, time_min_limit: str = SLURM_22_05):
        self.procs, self.free, self.resolution_s = procs, procs, resolution_s
        self.time_min_limit = time_min_limit
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
        ends = sorted((r.planned_end(now), r.job.procs) for r in self.running.values())
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
            if self.time_min_limit == ANY_START and 0 < job.time_min_s < limit and not job.soft_time_min:
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
        job = outcome.job
        return job.time_min_s if job.soft_time_min and job.time_min_s else outcome.limit_s

    def _backfill(self, job: SimJob, now: float, shadow: float, extra: int) -> Outcome | None:
        """Start ``job`` now if it does not delay the head's reservation (None otherwise)."""
        time_min = job.time_min_s if 0 < job.time_min_s < job.limit_s else 0.0
        if time_min and not job.soft_time_min and self.time_min_limit in (SLURM_22_05, ANY_START):
            if now + time_min < shadow or job.procs <= extra:
                return self._start(job, now, time_min, backfilled=True)
            return None
        if now + job.limit_s < shadow or job.procs <= extra:
            return self._start(job, now, job.limit_s, backfilled=True)
        if not time_min or now + time_min >= shadow:
            return None
        if job.soft_time_min:
            return self._start(job, now, job.limit_s, backfilled=True)
        minutes_left = math.floor((shadow - now) / 60) * 60       # _reset_job_time_limit
        return self._start(job, now, max(time_min, min(job.limit_s, minutes_left)), backfilled=True)
