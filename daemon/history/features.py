"""Per-job features from the job itself and from the history of jobs that already ended.

:class:`HistoryIndex` keeps, per user, the last few ended jobs (in end-time order) and turns a
job at submission into one fixed-length float vector (:data:`FEATURE_NAMES`). Missing values
are :data:`MISSING` (-1; every real feature is a log or a count, so >= 0 or clearly apart).
Pure Python on short lists: one call costs tens of microseconds.

>>> from hpcpredict.daemon.records import JobRecord
>>> index = HistoryIndex()
>>> index.add(JobRecord("1", "ann", 0.0, runtime_s=600.0, requested_time_s=3600.0, end_time=700.0))
>>> row = index.features(JobRecord("2", "ann", 800.0, requested_time_s=3600.0))
>>> round(row[FEATURE_NAMES.index("user_last1")], 3)   # log(600)
6.397
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from ..records import JobRecord

MISSING = -1.0
HISTORY_DEPTH = 24  # ended jobs remembered per user

FEATURE_NAMES = (
    "log_request", "log_procs", "log_nodes", "hour", "weekday",
    "user_count", "user_last1", "user_last2", "user_mean2", "user_median5", "user_max5",
    "user_min5", "user_spread5", "user_ratio_mean5", "user_ratio_max5", "user_censored5",
    "user_mean_all", "same_req_last", "same_req_median", "same_req_count",
    "same_app_last", "same_app_median", "same_app_count", "same_shape_last",
    "request_vs_last", "log_since_last_end", "last_request",
)


@dataclass(frozen=True, slots=True)
class PastJob:
    """What the features need from one ended job: not a second job shape but the compact,
    precomputed (log seconds) entry the per-user history keeps of a :class:`JobRecord`, so a
    prediction does no arithmetic on the raw record and the saved model stores five numbers
    per job."""

    log_runtime: float      # log of min(runtime, request): what the job really occupied
    log_request: float      # MISSING when no request
    procs: int
    application: str
    censored: bool
    end_time: float


def occupancy_log(record: JobRecord) -> float:
    """log seconds the job held its allocation, clamped to >= 1 s; for a censored job this is
    its limit (its true runtime is only known to be at least that)."""
    runtime = record.runtime_s
    if record.requested_time_s > 0:
        runtime = min(runtime, record.requested_time_s)
    return math.log(max(runtime, 1.0))


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else 0.5 * (ordered[mid - 1] + ordered[mid])


class HistoryIndex:
    """Recent ended jobs per user, and the feature vector of a job given them."""

    def __init__(self, depth: int = HISTORY_DEPTH):
        self.depth = depth
        self.by_user: dict[str, deque[PastJob]] = {}
        self.user_totals: dict[str, list[float]] = {}  # user -> [count, sum of log runtime]

    def __len__(self) -> int:
        return sum(int(c) for c, _ in self.user_totals.values())

    def add(self, record: JobRecord) -> None:
        """Remember an ended job (call in end-time order)."""
        if record.runtime_s < 0:
            return
        past = PastJob(
            log_runtime=occupancy_log(record),
            log_request=math.log(record.requested_time_s) if record.requested_time_s > 0 else MISSING,
            procs=record.procs, application=record.application,
            censored=record.censored, end_time=record.end_time,
        )
        history = self.by_user.get(record.user)
        if history is None:
            history = self.by_user[record.user] = deque(maxlen=self.depth)
            self.user_totals[record.user] = [0.0, 0.0]
        history.append(past)
        totals = self.user_totals[record.user]
        totals[0] += 1.0
        totals[1] += past.log_runtime

    def recent(self, user: str) -> list[PastJob]:
        """The user's remembered ended jobs, most recent last."""
        return list(self.by_user.get(user, ()))

    def features(self, job: JobRecord) -> list[float]:
        """The feature vector (ordered as :data:`FEATURE_NAMES`) of ``job`` at submission."""
        log_request = math.log(job.requested_time_s) if job.requested_time_s > 0 else MISSING
        procs = job.procs
        stamp = job.submit_time
        hour = (stamp % 86400.0) / 3600.0 if stamp > 0 else MISSING
        weekday = float(int(stamp // 86400.0 + 3) % 7) if stamp > 0 else MISSING  # 1970-01-01 was a Thursday
        history = self.by_user.get(job.user)
        row = [log_request, math.log1p(procs), math.log1p(job.nodes), hour, weekday]
        if not history:
            return row + [0.0] + [MISSING] * (len(FEATURE_NAMES) - len(row) - 1)
        past = list(history)
        runtimes = [p.log_runtime for p in past]
        last5 = runtimes[-5:]
        ratios5 = [p.log_runtime - p.log_request for p in past[-5:] if p.log_request != MISSING]
        count, total = self.user_totals[job.user]
        same_req = [p.log_runtime for p in past if p.log_request == log_request and p.procs == procs]
        if job.application:
            same_app = [p.log_runtime for p in past if p.application == job.application]
        else:
            same_app = []
        same_shape = [p.log_runtime for p in past if p.procs == procs]
        last = past[-1]
        row += [
            math.log1p(count), runtimes[-1], runtimes[-2] if len(runtimes) > 1 else MISSING,
            sum(runtimes[-2:]) / len(runtimes[-2:]), _median(last5), max(last5), min(last5),
            max(last5) - min(last5),
            sum(ratios5) / len(ratios5) if ratios5 else MISSING,
            max(ratios5) if ratios5 else MISSING,
            sum(p.censored for p in past[-5:]) / len(last5),
            total / count,
            same_req[-1] if same_req else MISSING,
            _median(same_req[-5:]) if same_req else MISSING,
            float(len(same_req)),
            same_app[-1] if same_app else MISSING,
            _median(same_app[-5:]) if same_app else MISSING,
            float(len(same_app)),
            same_shape[-1] if same_shape else MISSING,
            log_request - last.log_request if MISSING not in (log_request, last.log_request) else 0.0,
            math.log1p(max(stamp - last.end_time, 0.0)) if last.end_time > 0 and stamp > 0 else MISSING,
            last.log_request,
        ]
        return row
