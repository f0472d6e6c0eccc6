"""The daemon's forecast, kept fresh off the request path (:class:`ForecastKeeper`).

One thread reads the queue (:mod:`.queue`) and forecasts it (:func:`.simulate.forecast_starts`, in a
process of its own: :mod:`.worker`)
every ``[forecast] interval_s``, whatever the number of users; ``When`` about a submitted job
reads what it kept (:meth:`ForecastKeeper.latest`) and computes nothing. A job not yet
submitted needs one forecast of its own, on the kept queue (:meth:`ForecastKeeper.hypothetical`):
at most ``user_requests_per_minute`` a minute per uid, and one at a time in the daemon.
"""
from __future__ import annotations

import logging
import math
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from ..commands import run_command
from ..errors import HpcPredictError
from ..refresher import Refresher
from . import worker
from .belief import belief_from_interval
from .probes import PROBE_RUNS, STALE_INTERVALS, ProbeTable, probe_jobs, sbatch_phrase, with_room
from .simulate import MAX_JOBS
from .calibration import FirstForecasts
from .queue import ENVIRONMENT, SlurmJob, parse_squeue, snapshot_of, squeue_argv
from .recent import RecentSubmissions
from .types import QueuedJob, QueueSnapshot, RuntimeBelief, StartForecast

logger = logging.getLogger(__name__)

#: The stored low/high of a prediction are its model's 80 % central interval (the store keeps no
#: coverage; history/model.py and the served runtime models answer that one)
STORED_COVERAGE = 0.8
#: The uids whose rate is remembered: beyond, those whose bucket is full again are forgotten
MAX_RATE_USERS = 4096
#: Where the forecast simplifies, in the words users read (ADMIN.md, "Start-time forecast")
CAVEATS = ("one pool of CPUs: partitions, node placement and sizes, reservations, preemption and dependencies are "
           "not modelled; later submissions drawn from those of the last day (placed last); priorities as they are now")


class ForecastUnavailable(HpcPredictError):
    """No forecast to answer with (off, not read yet, the queue unreadable, the job not in it)."""


class RateLimited(HpcPredictError):
    """A user asked for more hypothetical forecasts than ``user_requests_per_minute``."""


@dataclass(frozen=True)
class Kept:
    """One refresh: the queue as read, Slurm's own planned starts, the forecast of it."""

    snapshot: QueueSnapshot
    forecasts: dict[str, StartForecast]
    squeue_starts: dict[str, float]            # pending job -> StartTime squeue printed (its backfill plan)
    left_out: int                              # pending jobs beyond [forecast] max_jobs
    held: frozenset[str] = field(default_factory=frozenset)   # priority 0: never started
    probes: ProbeTable | None = None           # [forecast] sbatch_line: the probe jobs' forecasts (probes.py)

    def job(self, job_id: str) -> QueuedJob | None:
        return next((job for job in self.snapshot.jobs if job.job_id == job_id), None)


class ForecastKeeper:
    """``config``: the ``[forecast]`` section; ``facts()``: the controller's facts (size, rule);
    ``refresh_facts``: reads them when nothing else does (None: something else does);
    ``belief_of(job)``: a job's runtime belief."""

    def __init__(self, config, *, facts: Callable, belief_of: Callable[[SlurmJob], RuntimeBelief | None],
                 refresh_facts: Callable[[], None] | None = None, facts_every_s: float = 300.0,
                 run: Callable[..., str] = run_command):
        self.config = config
        self._facts = facts
        self._belief_of = belief_of
        self._refresh_facts = refresh_facts
        self._facts_every_s = facts_every_s
        self._facts_read = -math.inf
        self._run = run
        self._kept: Kept | None = None
        self._beliefs: dict[str, RuntimeBelief | None] = {}   # job id -> belief: looked up once per job
        self._recent = RecentSubmissions()                    # the arrivals model's source
        self._first = FirstForecasts()                        # realized errors: the interval's calibration
        self._buckets: dict[int, tuple[float, float]] = {}    # uid -> (tokens, when)
        self._rate_lock = threading.Lock()
        self._computing = threading.Lock()                    # one hypothetical forecast at a time
        self._refresher = Refresher(self._keep, interval_s=config.interval_s, name="forecast",
                                    what="start-time forecast", logger=logger,
                                    unread="the queue has not been read yet")

    # ------------------------------------------------------------------ the thread
    def start(self) -> "ForecastKeeper":
        if self.config.enabled:
            self._refresher.start()
        return self

    def stop(self) -> None:
        self._refresher.stop()

    def refresh(self) -> None:
        """Read the queue and forecast it now (blocking: call it off the request path)."""
        self._refresher.attempt()

    def _keep(self) -> None:
        self._kept = self._read()

    def _read(self) -> Kept:
        if self._refresh_facts is not None and time.monotonic() - self._facts_read > self._facts_every_s:
            self._refresh_facts()
            self._facts_read = time.monotonic()
        facts = self._facts()
        if facts.total_cpus <= 0:
            raise ForecastUnavailable(f"the cluster's size is unknown ({facts.why}; `scontrol -o show nodes`)")
        taken = time.time()
        text = self._run(squeue_argv(self.config.squeue_command), timeout=self.config.squeue_timeout_s,
                         max_bytes=self.config.max_output_mib << 20, env=ENVIRONMENT)
        jobs = parse_squeue(text)
        present = {job.job_id for job in jobs}
        self._beliefs = {key: value for key, value in self._beliefs.items() if key in present}
        snapshot, left_out = snapshot_of(jobs, taken_s=taken, total_cpus=facts.total_cpus, planning_rule=facts.rule,
                                         max_jobs=min(self.config.max_jobs, MAX_JOBS), belief_of=self._cached_belief)
        snapshot = self._recent.observe(snapshot, present)
        forecasts = self._first.observe(snapshot, self._forecast(snapshot))
        return Kept(snapshot=snapshot, forecasts=forecasts, left_out=left_out,
                    probes=self._probe_table(snapshot) if self.config.sbatch_line else None,
                    squeue_starts={job.job_id: job.start_s for job in jobs if not job.running and job.start_s},
                    held=frozenset(job.job_id for job in jobs if job.state == "PENDING" and job.priority == 0))

    def _forecast(self, snapshot: QueueSnapshot, extra: QueuedJob | None = None, *,
                  probes: list[QueuedJob] | None = None, budget_s: float = 0.0) -> dict[str, StartForecast]:
        """forecast_starts in a process of its own (worker.py: not on the daemon's interpreter lock)."""
        runs = min(self.config.runs, PROBE_RUNS) if probes else self.config.runs
        text = self._run([sys.executable, "-m", worker.__name__], timeout=self.config.compute_timeout_s,
                         input=worker.encode(snapshot, runs, extra, probes, budget_s))
        try:
            return worker.decode_reply(text)
        except (ValueError, TypeError, AttributeError) as error:
            raise ForecastUnavailable(f"the forecast's process answered something else: {error}") from None

    def _probe_table(self, snapshot: QueueSnapshot) -> ProbeTable | None:
        """The probes' table of this read (probes.py), within half an interval (and half the
        worker's timeout) so the refresh keeps its pace, going on where the last one stopped; the
        last table (logged) when it cannot be had: the queue's own forecast is kept all the same."""
        began = time.monotonic()
        previous = self._kept.probes if self._kept is not None else None
        grid = probe_jobs(snapshot)
        start = previous.resume_at % len(grid) if previous is not None else 0   # where the budget stopped the last
        try:
            answers = self._forecast(snapshot, probes=grid[start:] + grid[:start],
                                     budget_s=min(self.config.interval_s, self.config.compute_timeout_s) / 2)
        except HpcPredictError as error:
            logger.warning("no start estimates for the sbatch line this interval: %s", error)
            return previous
        answers = {key: self._first.calibration.adjust(value, snapshot.taken_s) for key, value in answers.items()}
        return ProbeTable.of(snapshot, answers, compute_s=time.monotonic() - began, previous=previous,
                             started_at=start)

    def _cached_belief(self, job: SlurmJob) -> RuntimeBelief | None:
        if job.job_id not in self._beliefs:
            try:
                self._beliefs[job.job_id] = self._belief_of(job)
            except HpcPredictError as error:    # a store that cannot answer now: asked again next time
                logger.info("no runtime belief for job %s: %s", job.job_id, error)
                return None
        return self._beliefs[job.job_id]

    # ------------------------------------------------------------------ answers
    def latest(self) -> Kept:
        """The kept forecast; ForecastUnavailable saying why there is none."""
        if not self.config.enabled:
            raise ForecastUnavailable("the start-time forecast is off on this daemon ([forecast] enabled = false)")
        if self._kept is None:
            raise ForecastUnavailable(f"no forecast yet: {self._refresher.error}")
        return self._kept

    @property
    def error(self) -> str:
        """Why the last refresh failed ("" = it worked)."""
        return self._refresher.error

    def sbatch_phrase(self, cpus: int, planned_s: float) -> str:
        """What Predict's sbatch line adds for a job of ``cpus`` planned with ``planned_s``
        (``[forecast] sbatch_line``): a look-up in the kept table, never a computation and no lock
        (the hook's budget); "" when off, not kept, or older than STALE_INTERVALS intervals."""
        if not (self.config.enabled and self.config.sbatch_line):
            return ""
        kept = self._kept                       # one read of the reference the thread replaces whole
        return sbatch_phrase(kept.probes if kept is not None else None, cpus, planned_s, now=time.time(),
                             max_age_s=STALE_INTERVALS * self.config.interval_s)

    def hypothetical(self, extra: QueuedJob, uid: int) -> tuple[Kept, StartForecast]:
        """One forecast of the kept queue with ``extra`` added, for ``uid`` (rate-limited)."""
        kept = self.latest()
        if not self._take(uid):
            raise RateLimited(f"at most {self.config.user_requests_per_minute:g} forecasts of a job not yet submitted "
                              f"a minute per user ([forecast] user_requests_per_minute); try again in a minute")
        if not self._computing.acquire(blocking=False):
            raise ForecastUnavailable("another forecast of a job not yet submitted is running; try again in a moment")
        try:
            pending = sum(1 for job in kept.snapshot.jobs if job.start_s is None)
            placed = replace(extra, priority_rank=pending)   # last: a job submitted now, before age raises it
            answer = self._forecast(with_room(kept.snapshot), placed)   # a full picture: its last pending job out
        finally:
            self._computing.release()
        if placed.job_id not in answer:
            raise ForecastUnavailable("the forecast gave no start for this job")
        return kept, self._first.calibration.adjust(answer[placed.job_id], kept.snapshot.taken_s)

    def _take(self, uid: int) -> bool:
        rate = self.config.user_requests_per_minute / 60.0
        burst = max(1.0, self.config.user_requests_per_minute)
        now = time.monotonic()
        with self._rate_lock:
            tokens, when = self._buckets.get(uid, (burst, now))
            tokens = min(burst, tokens + (now - when) * rate)
            if len(self._buckets) >= MAX_RATE_USERS and uid not in self._buckets:
                self._buckets = {key: value for key, value in self._buckets.items()
                                 if value[0] + (now - value[1]) * rate < burst}
            if tokens < 1.0:
                self._buckets[uid] = (tokens, now)
                return False
            self._buckets[uid] = (tokens - 1.0, now)
            return True


def stored_belief(store, job: SlurmJob) -> RuntimeBelief | None:
    """The belief of the hooks' stored prediction the job's AdminComment names (of its own user),
    None when there is none."""
    if not job.prediction_id:
        return None
    row = store.prediction(job.prediction_id)
    if row is None or row.user != job.user:
        return None
    return belief_from_interval(row.runtime_s, row.low_s, row.high_s, STORED_COVERAGE)
