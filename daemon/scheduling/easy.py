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
start now it starts, and what it then runs under, and how it is planned once running, depends
on the release (``slurm``, a release number ``X.Y[.Z]``: :func:`parse_release`) and on
``SchedulerParameters=time_min_as_soft_limit`` (``soft_limit``; None: set, hpcpredict's main
path). :func:`semantics` maps the two to one of five behaviours:

- before 23.11 (``"22.05"``, ``"23.02"``; what our 22.05 test cluster runs and
  ``tests/slurm/test_sched_replay.py`` checks), option or not (slurmctld accepts the word
  silently and ignores it): a backfill start runs under its ``time_min``, a kill limit
  (``backfill-time-min``). 22.05's backfill sets ``time_limit = job_ptr->time_limit =
  job_ptr->time_min``, so ``_reset_job_time_limit`` can only return ``time_min``, even where the
  full limit would have fitted. The main scheduler (step 1) never lowers a limit.
- 23.11 to 25.05.2 without the option (``any-time-min``): every job with a ``time_min`` runs
  under exactly it, also one that fits at the head: the backfill thread starts such jobs before
  the main scheduler and gives them their ``time_min`` (measured on 24.11.5, FINDINGS S7/S7b;
  SchedMD ticket 23350, fixed in 25.05.3).
- 25.05.3 and later without the option (``reservation``): the full limit, lowered by
  ``_reset_job_time_limit`` to the whole minutes left before the first reservation the job
  overlaps (``(begin_time - now) / 60``), never below ``time_min``.
- 23.11.0 to 25.05.3 with the option (``hard_end``, :data:`HARD_END`): the job is *started* by
  the ``time_min`` test and keeps its full limit (never killed before it). Once running it is
  planned at its *hard* end for every other job: Slurm restores ``time_limit`` and ``end_time``
  right after the start and a pending job's start comes from the select plugin's will-run
  test, which frees running jobs at ``end_time`` (measured on 24.11.5: the head's StartTime
  jumped to the soft job's start + its ``--time``, FINDINGS S1/S3). Only within the pass that
  starts it is it counted to its ``time_min`` (``_bf_reserve_running`` right after the start):
  it takes no extra processors when its ``time_min`` ends before the reservation. So every soft
  job moves the head's reservation to its hard end, and backfill fills the window it opened.
- 25.05.4 / 25.11.0 and later with the option (``soft_then_halfway``, :data:`SOFT_THEN_HALFWAY`):
  started and kept as above, but the will-run test plans a running job with a ``time_min``
  (however it started) to end at ``start + time_min``, and once that has passed at
  ``now + (hard end - now) / 2``, re-evaluated at every pass (``_soft_job_end`` in
  ``src/plugins/select/cons_tres/job_test.c``, SchedMD ticket 23426; measured on 26.05.5: the
  head's StartTime moved 1 s for every 2 s once the soft end had passed, FINDINGS 26.05 section
  1). A reservation then slips by what the soft job overruns its ``time_min``, not to its hard
  end. Passes run at every event here, and one more right after each running soft job's soft
  end (``start + time_min + 1 s``, the first second Slurm's ``<`` applies the halfway rule):
  there its planned end jumps from the soft end to halfway to the hard end, which can open a
  window for jobs already waiting. Between those instants the planned end only moves later at
  half the clock's speed, so a job that does not fit before a reservation at one pass does not
  fit at a later one (up to ``bf_resolution``'s rounding) and no other pass is needed for the
  jobs ending before the shadow. What is not re-tested between events: the extra processors
  can grow when a moving planned end overtakes a fixed one (the shadow passes another job's
  end); Slurm would see that at its next ``bf_interval`` pass, the replay at its next event.

A release without a patch level means its ``.0``: ``"25.05"`` is 25.05.0 (hard-end rule, and
without the option every start under its ``time_min``), ``"26.05"`` is 26.05.0 (the halfway
rule). Give ``"25.05.3"`` or ``"25.05.4"`` for the releases where 25.05 changed.

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

>>> from hpcpredict.daemon.scheduling.jobs import SimJob
>>> jobs = [SimJob(0, "a", 0, 2, 600, 600, 600), SimJob(1, "b", 1, 4, 60, 600, 600),
...         SimJob(2, "c", 2, 2, 900, 3600, 3600, time_min_s=120)]
>>> [(o.job.job_id, o.start_s, o.limit_s, o.killed) for o in simulate(jobs, procs=4, slurm="22.05")]
[('a', 0, 600, False), ('c', 2, 120, True), ('b', 600, 600, False)]
>>> [o.limit_s for o in simulate(jobs, procs=4, slurm="25.05.3", soft_limit=False)]
[600, 540, 600]
>>> [(o.job.job_id, o.start_s, o.limit_s, o.killed) for o in simulate(jobs, procs=4, slurm="24.11")]
[('a', 0, 600, False), ('c', 2, 3600, False), ('b', 902, 600, False)]
>>> semantics("22.05", soft_limit=True), semantics("24.11.5"), semantics("25.05"), semantics("26.05")
('backfill-time-min', 'hard_end', 'hard_end', 'soft_then_halfway')
"""
from __future__ import annotations

import heapq
import math
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..policy import controller
from .jobs import SimJob

SLURM_BF_RESOLUTION_S = 60    # Slurm's default bf_resolution
# One release per behaviour (any "X.Y[.Z]" is accepted: parse_release); the default replayed:
SLURM_RELEASES = ("22.05", "23.02", "23.11", "24.11", "25.05.3", "25.05.4", "25.11", "26.05")
DEFAULT_RELEASE = "24.11"
SOFT_LIMIT_SINCE = "23.11"    # the release that added time_min_as_soft_limit
HALFWAY_SINCE = "25.05.4"     # _soft_job_end (SchedMD ticket 23426), also in 25.11.0 and later
# The planning rules of a running soft job, named as the daemon's policy names them (daemon/policy):
HARD_END = "hard_end"                    # 23.11.0 - 25.05.3: at its hard end
SOFT_THEN_HALFWAY = "soft_then_halfway"  # 25.05.4+: at start + time_min, then halfway to the hard end
PLANNING_RULES = (HARD_END, SOFT_THEN_HALFWAY)
# What a job with a time_min below its limit runs under once started where the option is off (see above):
_BACKFILL_TIME_MIN = "backfill-time-min"   # < 23.11: a backfill start runs under its time_min
_ANY_TIME_MIN = "any-time-min"             # 23.11 - 25.05.2 without the option: every start does
_RESERVATION = "reservation"               # 25.05.3+ without the option: the room before the reservation
BACKFILL_TIME_MIN, ANY_TIME_MIN, RESERVATION = _BACKFILL_TIME_MIN, _ANY_TIME_MIN, _RESERVATION
MODES = (_BACKFILL_TIME_MIN, _ANY_TIME_MIN, _RESERVATION, HARD_END, SOFT_THEN_HALFWAY)   # semantics()'s answers
_RESET_FIXED_SINCE = (25, 5, 3)            # SchedMD ticket 23350
_END, _SUBMIT, _PASS = 0, 1, 2  # at one instant, ends free processors before submissions look
_FIRST_PASS = -1                # the seq of run_forward's pass at its start (no job has it)
_RELEASE_NUMBER = re.compile(r"\d{2}\.\d{2}(?:\.\d{1,3})?")


def parse_release(slurm: str) -> tuple[int, int, int]:
    """``"24.11.5"`` -> (24, 11, 5); a missing patch level is 0 (``"25.05"`` is 25.05.0), as the
    daemon reads a controller's ``SLURM_VERSION`` (:func:`~hpcpredict.daemon.policy.controller.parse_release`).
    ValueError for anything but a release number (``"latest"``, ``"24"``, ``"24.13"``)."""
    release = controller.parse_release(slurm) if _RELEASE_NUMBER.fullmatch(str(slurm)) else None
    if release is None or not 1 <= release[1] <= 12:
        raise ValueError(f"slurm must be a Slurm release number X.Y[.Z] (such as {', '.join(SLURM_RELEASES)}), "
                         f"got {slurm!r}")
    return release


def planning_rule(slurm: str, soft_limit: bool | None = None) -> str | None:
    """How release ``slurm`` plans a running soft job for every other job (:data:`HARD_END` or
    :data:`SOFT_THEN_HALFWAY`), the daemon's rule for that controller
    (:func:`~hpcpredict.daemon.policy.controller.planning_rule`); None where ``--time-min`` is a
    kill limit: the option is off (``soft_limit`` False) or the release has none (before 23.11
    the word is ignored)."""
    rule = controller.planning_rule(parse_release(slurm), soft_limit is not False)
    return rule if rule in PLANNING_RULES else None


def semantics(slurm: str, soft_limit: bool | None = None) -> str:
    """What a started ``time_min`` job runs under on release ``slurm`` and how it is planned:
    the planning rule where ``--time-min`` is soft (:func:`planning_rule`), otherwise which
    kill limit (``backfill-time-min``, ``any-time-min``, ``reservation``). ``soft_limit``: whether
    ``time_min_as_soft_limit`` is set (None: set); before 23.11 it is ignored, as slurmctld does."""
    rule = planning_rule(slurm, soft_limit)
    if rule is not None:
        return rule
    release = parse_release(slurm)
    if release < controller.SOFT_OPTION_SINCE:
        return _BACKFILL_TIME_MIN
    return _RESERVATION if release >= _RESET_FIXED_SINCE else _ANY_TIME_MIN


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
class Running:
    """A running job as the scheduler holds it (what :func:`simulate`'s ``observe`` is shown)."""

    job: SimJob
    start_s: float
    limit_s: float

    @property
    def soft_end(self) -> float:
        """``start + time_min`` for a job started with a time_min below its limit, else 0."""
        time_min = self.job.time_min_s
        return self.start_s + time_min if 0 < time_min < self.limit_s else 0.0

    def planned_end(self, now: float, mode: str) -> float:
        """When the scheduler expects it to end at ``now``: its limit (a soft job's hard one),
        except under the halfway rule (``_soft_job_end``): its soft end, once past it halfway
        from now to its hard end."""
        hard_end = self.start_s + self.limit_s
        if mode != SOFT_THEN_HALFWAY or not self.soft_end:
            return hard_end
        return self.soft_end if self.soft_end >= now else now + (hard_end - now) / 2


Observer = Callable[[float, "list[SimJob]", "Iterable[Running]"], None]


def simulate(jobs: Iterable[SimJob], procs: int, resolution_s: float = SLURM_BF_RESOLUTION_S,
             slurm: str = DEFAULT_RELEASE, soft_limit: bool | None = None,
             resubmit_killed: bool = False, observe: Observer | None = None) -> list[Outcome]:
    """Replay ``jobs`` on ``procs`` processors; one :class:`Outcome` per job, in start order.

    ``resolution_s``: reservation start times are rounded down to it (Slurm's
    ``bf_resolution``; 0 = exact, plain EASY). ``slurm`` and ``soft_limit``: the release
    (``"X.Y[.Z]"``) and whether ``time_min_as_soft_limit`` is set (None: set; see above).
    ``resubmit_killed``: a job killed below its user's request is submitted again at its kill
    (one more outcome, whose ``job.retry_of`` is the killed job's ``seq``). ``observe``: called
    after every scheduling pass with the instant, the jobs waiting (in queue order) and the
    :class:`Running` ones; it must not change them (the forecast's measurement reads the queue
    there)."""
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
    _run(events, state, resubmit_killed, next_seq, observe=observe)
    return state.outcomes


@dataclass(frozen=True, slots=True)
class Started:
    """A job already running when a replay begins (:func:`run_forward`): since ``start_s`` under
    ``limit_s``; it ends at ``start_s + min(job.work_s, limit_s)``."""

    job: SimJob
    start_s: float
    limit_s: float


def run_forward(now: float, running: Iterable[Started], pending: Sequence[SimJob], procs: int, mode: str,
                resolution_s: float = SLURM_BF_RESOLUTION_S, until: int | None = None,
                arrivals: Sequence[SimJob] = ()) -> list[Outcome]:
    """The queue run on from a state at ``now``: ``running`` jobs, ``pending`` ones waiting in
    priority order (the head first); one :class:`Outcome` per job that started, in start order.
    ``mode``: one of :data:`MODES` (:func:`semantics` of a release). ``arrivals``: jobs submitted
    later (``submit_s`` after ``now``), each appended to the queue's tail at its submission as
    FCFS does; with them and no ``until`` the run stops once every ``pending`` job has started
    (the arrivals after that change none of their starts). ``until``: stop once the pending job
    of that ``seq`` has started (the jobs behind it can still delay it by backfilling before it,
    so they are run until then). A running job whose end is already past ends ``now``."""
    if procs <= 0:
        raise ValueError(f"machine size must be positive, got {procs}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    state = _Machine(procs, resolution_s, mode)
    events: list[tuple[float, int, int, SimJob]] = []
    for started in running:
        job = started.job
        state.free -= job.procs
        state.running[job.seq] = Running(job, started.start_s, started.limit_s)
        _push_end(events, state, job, max(now, started.start_s + min(job.work_s, started.limit_s)), now)
    if state.free < 0:
        raise ValueError(f"running jobs hold {procs - state.free} processors of {procs}")
    for job in pending:
        if not 0 < job.procs <= procs:
            raise ValueError(f"job {job.job_id} needs {job.procs} processors of {procs}")
    for job in arrivals:
        if not 0 < job.procs <= procs or not job.submit_s > now:
            raise ValueError(f"arrival {job.job_id} needs {job.procs} processors of {procs}, submitted after {now}")
        events.append((job.submit_s, _SUBMIT, job.seq, job))
    if not pending:
        return []
    state.queue = list(pending)
    heapq.heapify(events)
    heapq.heappush(events, (now, _PASS, _FIRST_PASS, pending[0]))
    waiting = {job.seq for job in pending} if arrivals and until is None else None
    _run(events, state, False, 0, until, waiting=waiting)
    return state.outcomes


def _push_end(events: list, state: "_Machine", job: SimJob, end_s: float, now: float) -> None:
    heapq.heappush(events, (end_s, _END, job.seq, job))
    soft_end = state.running[job.seq].soft_end
    if state.mode == SOFT_THEN_HALFWAY and soft_end and end_s > soft_end + 1 > now:
        # the first second the halfway rule applies: its planned end jumps later
        heapq.heappush(events, (soft_end + 1, _PASS, job.seq, job))


def _run(events: list, state: "_Machine", resubmit_killed: bool, next_seq: int, until: int | None = None,
         observe: Observer | None = None, waiting: set[int] | None = None) -> None:
    """The event loop: the events of each instant, then one scheduling pass. ``waiting``: stop
    once every job of these ``seq`` has started (emptied as they do)."""
    while events:
        now = events[0][0]
        passes = False
        while events and events[0][0] == now:
            _, kind, seq, job = heapq.heappop(events)
            if kind == _PASS:
                # a soft end passed while running, or the first pass of run_forward
                passes = passes or seq in state.running or seq == _FIRST_PASS
                continue
            passes = True
            if kind == _END:
                state.free += job.procs
                del state.running[seq]
            else:
                state.queue.append(job)
        if not passes:
            continue
        for outcome in state.schedule(now):
            _push_end(events, state, outcome.job, outcome.end_s, now)
            if resubmit_killed and outcome.killed and outcome.limit_s < outcome.job.request_limit_s:
                # the user's own request never ends in a retry: only a limit we set below it
                retry = outcome.job.resubmission(next_seq, outcome.end_s)
                heapq.heappush(events, (outcome.end_s, _SUBMIT, next_seq, retry))
                next_seq += 1
            if outcome.job.seq == until:
                return
            if waiting is not None:
                waiting.discard(outcome.job.seq)
                if not waiting:
                    return
        if observe is not None:
            observe(now, state.queue, state.running.values())


class _Machine:
    def __init__(self, procs: int, resolution_s: float, mode: str):
        self.procs, self.free, self.resolution_s, self.mode = procs, procs, resolution_s, mode
        self.queue: list[SimJob] = []
        self.running: dict[int, Running] = {}
        self.outcomes: list[Outcome] = []

    def _start(self, job: SimJob, now: float, limit: float, backfilled: bool) -> Outcome:
        self.free -= job.procs
        self.running[job.seq] = Running(job, now, limit)
        run = min(job.work_s, limit)
        outcome = Outcome(job, now, now + run, limit, job.work_s > limit, backfilled)
        self.outcomes.append(outcome)
        return outcome

    def _reservation(self, head: SimJob, now: float) -> tuple[float, int]:
        """(shadow time rounded down to the resolution, extra processors) for the head job."""
        available = self.free
        ends = sorted((r.planned_end(now, self.mode), r.job.procs) for r in self.running.values())
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
        soft = self.mode in PLANNING_RULES and 0 < job.time_min_s < job.limit_s
        return job.time_min_s if soft else outcome.limit_s

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
        if self.mode in PLANNING_RULES:
            return self._start(job, now, job.limit_s, backfilled=True)
        minutes_left = math.floor((shadow - now) / 60) * 60       # _reset_job_time_limit
        return self._start(job, now, max(time_min, min(job.limit_s, minutes_left)), backfilled=True)
