"""A start estimate for the sbatch line (``[forecast] sbatch_line``): probe jobs forecast at each refresh.

The hook's Predict runs under slurmctld's job write lock: it may not wait for a forecast. So at
each refresh (:mod:`.keeper`, in the forecast's own process, :mod:`.worker`) a fixed grid of
**probe jobs** is forecast, each submitted at the read, last in the queue, one at a time (each
probe is a forecast of its own: the probes never delay one another), and Predict looks the
job's class up in the kept table (:meth:`ProbeTable.lookup`, :func:`sbatch_phrase`): no
computation, no lock.

The grid is keyed by what moves a pending job's start, its size and the length backfill plans
it with (its ``--time-min`` where one is set, else its time limit: the job's own runtime never
moves its own start, only the hole it must fit). Where hpcpredict sets the limits (soft, bound)
that planned length is the one derived from the predicted runtime. A probe stands at the upper
edge of its class (the largest, longest job of it), so the estimate does not promise a job an
earlier start than its class's hardest member gets:

- CPUs: 1, a quarter, a half, the whole cluster (rounded; duplicates dropped on a small one):
  the sizes at which backfill's chances change (one CPU fits nearly every hole, a half-cluster
  job needs a drained half, the whole cluster waits for everything ahead);
- planned length: 10 min, 1 h, 4 h, 1 d, and 3 d for longer (each class 4-6x the one before:
  backfill's holes are hours wide on a busy cluster, minutes on a quiet one).

At most 4 x 5 = 20 probes, each ``min(runs, PROBE_RUNS)`` runs, within ``budget_s`` a refresh;
on a deep queue the next refresh goes on where the budget stopped this one, the entries not
reached kept, each as old as it is (:class:`ProbeTable`; stale past ``STALE_INTERVALS``).
"""
from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from . import simulate
from .types import QueuedJob, QueueSnapshot, StartForecast

if TYPE_CHECKING:
    from ..jobspec import JobSpec

SIZE_FRACTIONS = (0.25, 0.5, 1.0)                  # beside one CPU
PLANNED_EDGES_S = (600.0, 3600.0, 4 * 3600.0, 86400.0, 3 * 86400.0)
PLANNED_SAID = dict(zip(PLANNED_EDGES_S, ("up to 10 min", "up to 1 h", "up to 4 h", "up to 1 d", "more than 1 d")))
PROBE_RUNS = 16            # per probe: the 80 % interval is the 10th-90th percentile of these
PROBE_USER = "(probe)"
PHRASE_STEP_S = 15.0       # a phrase is formatted once per class and so many seconds (it says whole minutes)
#: A table made longer ago than this many ``[forecast] interval_s`` says nothing (the thread is stuck or
#: squeue fails); counted from when the refresh made it, not from the read (a refresh of a deep
#: queue may take longer than a short interval)
STALE_INTERVALS = 3


def size_edges(total_cpus: int) -> tuple[int, ...]:
    """The probes' sizes on a cluster of ``total_cpus``.

    >>> size_edges(64), size_edges(3), size_edges(1)
    ((1, 16, 32, 64), (1, 2, 3), (1,))
    """
    return tuple(sorted({1, *(max(1, round(total_cpus * share)) for share in SIZE_FRACTIONS)}))


def probe_id(cpus: int, planned_s: float) -> str:
    return f"probe {cpus}x{planned_s:.0f}"


def probe_jobs(snapshot: QueueSnapshot) -> list[QueuedJob]:
    """The grid's probes for ``snapshot``: submitted at the read, after every pending job."""
    last = sum(1 for job in snapshot.jobs if job.start_s is None)
    return [QueuedJob(job_id=probe_id(cpus, planned), user=PROBE_USER, partition="", cpus=cpus,
                      time_limit_s=planned, time_min_s=None, submit_s=snapshot.taken_s, start_s=None,
                      priority_rank=last, belief=None)
            for cpus in size_edges(snapshot.total_cpus) for planned in PLANNED_EDGES_S]


def forecast_probes(snapshot: QueueSnapshot, probes: list[QueuedJob], *, runs: int, budget_s: float,
                    clock=time.monotonic) -> dict[str, StartForecast]:
    """Each probe's forecast, one forecast each (in the worker's process); the probes not reached
    within ``budget_s`` are left out."""
    began = clock()
    answers: dict[str, StartForecast] = {}
    snapshot = with_room(snapshot)
    for probe in probes:
        if clock() - began > budget_s:
            break
        answer = simulate.forecast_starts(snapshot, runs=runs, extra=probe)
        if probe.job_id in answer:
            answers[probe.job_id] = answer[probe.job_id]
    return answers


def with_room(snapshot: QueueSnapshot) -> QueueSnapshot:
    """``snapshot`` with room for one probe within the forecast's :data:`~.simulate.MAX_JOBS`: the
    last pending job left out, as ``[forecast] max_jobs`` leaves out the ones beyond it.

    >>> from .types import QueuedJob as J
    >>> jobs = [J(str(n), "u", "", 1, 60.0, None, 0.0, None, n, None) for n in range(simulate.MAX_JOBS)]
    >>> full = QueueSnapshot(0.0, 4, "kill", tuple(jobs))
    >>> [len(with_room(s).jobs) for s in (full, replace(full, jobs=full.jobs[:10]))], with_room(full).jobs[-1].job_id
    ([1999, 10], '1998')
    """
    over = len(snapshot.jobs) + 1 - simulate.MAX_JOBS
    if over <= 0:
        return snapshot
    pending = sorted((job for job in snapshot.jobs if job.start_s is None),
                     key=lambda job: (job.priority_rank, job.submit_s, job.job_id))
    left_out = {job.job_id for job in pending[max(0, len(pending) - over):]}
    return replace(snapshot, jobs=tuple(job for job in snapshot.jobs if job.job_id not in left_out))


@dataclass(frozen=True)
class ProbeTable:
    """The probes' forecasts: (CPUs edge, planned edge) -> forecast, and when each was made.

    On a deep queue the budget cuts the grid: the next refresh resumes where this one stopped
    (``resume_at``) and keeps the entries it did not reach, each aged by its own ``made``."""

    taken_s: float
    sizes: tuple[int, ...]
    starts: dict[tuple[int, float], StartForecast] = field(default_factory=dict)
    compute_s: float = 0.0                 # what the table cost the worker's process (wall clock)
    made_s: float = 0.0                    # when the refresh made it (epoch; 0: at the read)
    made: dict[tuple[int, float], float] = field(default_factory=dict)   # an entry kept from an earlier refresh
    resume_at: int = 0                     # the grid's index the next refresh starts at
    # the phrases said (class, PHRASE_STEP_S of time): Predict's look-up formats each once; at most
    # 20 classes x (STALE_INTERVALS intervals / PHRASE_STEP_S) before the table is replaced or stale
    phrases: dict[tuple[int, float, int], str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, snapshot: QueueSnapshot, answers: dict[str, StartForecast], compute_s: float = 0.0, *,
           previous: "ProbeTable | None" = None, started_at: int = 0, now: float | None = None) -> "ProbeTable":
        """The table of ``answers`` (the grid from ``started_at`` on, as far as the budget went),
        with ``previous``'s entries this refresh did not reach."""
        now = time.time() if now is None else now
        sizes = size_edges(snapshot.total_cpus)
        keys = [(cpus, planned) for cpus in sizes for planned in PLANNED_EDGES_S]
        starts, made = {}, {}
        if previous is not None and previous.sizes == sizes:
            for key, forecast in previous.starts.items():
                starts[key], made[key] = forecast, previous.entry_made_s(key)
        reached = 0
        for key in keys:
            if probe_id(*key) in answers:
                starts[key] = answers[probe_id(*key)]
                made.pop(key, None)
                reached += 1
        resume_at = 0 if reached >= len(keys) else (started_at + reached) % len(keys)
        return cls(taken_s=snapshot.taken_s, sizes=sizes, starts=starts, compute_s=compute_s, made_s=now, made=made,
                   resume_at=resume_at)

    def entry_made_s(self, key: tuple[int, float]) -> float:
        return self.made.get(key, self.made_s or self.taken_s)

    def lookup(self, cpus: int, planned_s: float) -> tuple[int, float, StartForecast] | None:
        """The class of a job of ``cpus`` planned with ``planned_s`` (math.inf: unlimited) and its
        forecast; None when the job is larger than the cluster or its probe was not reached."""
        size = bisect.bisect_left(self.sizes, max(1, cpus))
        if size == len(self.sizes):
            return None
        length = min(bisect.bisect_left(PLANNED_EDGES_S, planned_s), len(PLANNED_EDGES_S) - 1)
        key = (self.sizes[size], PLANNED_EDGES_S[length])
        forecast = self.starts.get(key)
        return None if forecast is None else (*key, forecast)


def _wait(seconds: float) -> tuple[float, str]:
    if seconds < 2 * 3600:
        return math.ceil(seconds / 60), "min"
    if seconds < 2 * 86400:
        return round(seconds / 3600, 1), "h"
    return round(seconds / 86400, 1), "d"


def _said(value: float, unit: str) -> str:
    return f"{value:g} {unit}"


def planned_length_s(limits, spec: JobSpec) -> float:
    """What backfill plans a submitted job with (what moves its start: the key of the probes' table): the
    --time-min set (ours or the user's), else the --time set, else the user's, else the
    partition's DefaultTime, else its MaxTime; math.inf when none or UNLIMITED."""
    if spec.time_limit_unlimited and not (limits.time_min_s or limits.time_limit_s or spec.time_min_s):
        return math.inf
    return float(limits.time_min_s or spec.time_min_s or limits.time_limit_s or spec.time_limit_s
                 or spec.default_time_s or spec.max_time_s) or math.inf


def sbatch_phrase(table: ProbeTable | None, cpus: int, planned_s: float, *, now: float, max_age_s: float) -> str:
    """What the sbatch line adds (``"; likely to start in ..."``), "" when the table is missing,
    made more than ``max_age_s`` ago or has no forecast for the job's class.

    >>> f = StartForecast("probe 16x3600", 1000.0 + 1500, 1000.0 + 600, 1000.0 + 3000, None, 16)
    >>> table = ProbeTable(1000.0, (1, 16, 32, 64), {(16, 3600.0): f})
    >>> sbatch_phrase(table, 8, 2000, now=1000.0, max_age_s=180)
    '; likely to start in ~25 min (80%: 10-50 min; the estimate for a job like this one: up to 16 CPUs, planned up to 1 h)'
    >>> sbatch_phrase(table, 8, 2000, now=1200.0, max_age_s=180), sbatch_phrase(table, 8, 7200, now=1000.0, max_age_s=180)
    ('', '')
    """
    if table is None:
        return ""
    found = table.lookup(cpus, planned_s)
    if found is None or not now - table.entry_made_s(found[:2]) <= max_age_s:
        return ""
    size, planned, forecast = found
    said = (size, planned, int(now // PHRASE_STEP_S))
    phrase = table.phrases.get(said)
    if phrase is None:
        phrase = table.phrases[said] = _phrase(size, planned, forecast, now)
    return phrase


def _phrase(size: int, planned: float, forecast: StartForecast, now: float) -> str:
    median, low, high = (_wait(max(0.0, start - now)) for start in
                         (forecast.median_start_s, forecast.low80_start_s, forecast.high80_start_s))
    start = "within a minute" if median == (0, "min") else f"in ~{_said(*median)}"
    spread = (f"{low[0]:g}-{_said(*high)}" if low[1] == high[1] else f"{_said(*low)} - {_said(*high)}")
    return (f"; likely to start {start} (80%: {spread}; the estimate for a job like this one: "
            f"up to {size} CPU{'s' if size > 1 else ''}, planned {PLANNED_SAID[planned]})")


