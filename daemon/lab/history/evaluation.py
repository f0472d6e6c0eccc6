"""Online evaluation of walltime predictors by replaying a trace in time order.

The protocol is the only honest one: jobs are taken in submission order; before a job is
predicted, every job that has *ended* by its submit time (and only those) is passed to
``observe``, in end-time order. A job whose end equals the submit time counts as ended.

>>> from hpcpredict.daemon.records import JobRecord
>>> from hpcpredict.daemon.history.predictors import UserRequestPredictor
>>> jobs = [JobRecord(str(i), "ann", 100.0 * i, runtime_s=50.0, requested_time_s=100.0,
...                   end_time=100.0 * i + 50.0) for i in range(4)]
>>> result = replay(jobs, {"user": UserRequestPredictor()})
>>> score(result)["user"].accuracy
0.5
"""
from __future__ import annotations

import heapq
import math
from dataclasses import asdict, dataclass
from typing import Callable, Iterable

import numpy as np

from ...history.model import WalltimeModel
from ...history.predictors import BASELINES, OnlinePredictor
from ...records import JobRecord

BOUND_SUFFIX = "-bound"


@dataclass(frozen=True)
class Scores:
    """Metrics of one prediction series over the scored jobs."""

    n: int
    accuracy: float        # mean min(p, r) / max(p, r)
    under_rate: float      # share with p < r
    kill_rate: float       # among jobs that ended within their request: share with p < r
    median_ratio: float    # median p / r
    mae_s: float           # mean |p - r| in seconds

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ReplayResult:
    """Predictions per series, aligned with the scored jobs."""

    runtime_s: np.ndarray          # observed runtime (clamped to >= 1 s)
    finished_within_request: np.ndarray   # bool: not censored
    predictions: dict              # series name -> np.ndarray of seconds


def end_time(job: JobRecord) -> float:
    """When the job ended (start + runtime when the trace gives no end)."""
    if job.end_time >= 0:
        return job.end_time
    start = job.start_time if job.start_time >= 0 else job.submit_time
    return start + job.runtime_s


def scorable(jobs: Iterable[JobRecord]) -> list[JobRecord]:
    """Jobs with a known submit time and runtime, in submission order (stable)."""
    usable = [j for j in jobs if j.runtime_s >= 0 and j.submit_time >= 0]
    return sorted(usable, key=lambda j: j.submit_time)


def default_predictors() -> dict[str, OnlinePredictor]:
    """Every baseline plus our model, fresh."""
    predictors: dict[str, OnlinePredictor] = {name: cls() for name, cls in BASELINES.items()}
    predictors[WalltimeModel.name] = WalltimeModel()
    return predictors


def replay(jobs: Iterable[JobRecord], predictors: dict[str, OnlinePredictor], risk: float = 0.03,
           progress: Callable[[int, int], None] | None = None) -> ReplayResult:
    """Replay ``jobs`` online through every predictor. Series: each predictor's ``runtime_s``
    under its name and, for predictors with ``has_bound``, ``bound_s`` under ``name-bound``."""
    ordered = scorable(jobs)
    total = len(ordered)
    series = {name: np.empty(total) for name in predictors}
    for name, predictor in predictors.items():
        if getattr(predictor, "has_bound", False):
            series[name + BOUND_SUFFIX] = np.empty(total)
    running: list[tuple[float, int]] = []   # (end time, index) of submitted, not yet observed jobs
    for index, job in enumerate(ordered):
        while running and running[0][0] <= job.submit_time:
            _, done = heapq.heappop(running)
            for predictor in predictors.values():
                predictor.observe(ordered[done])
        for name, predictor in predictors.items():
            answer = predictor.submit(job, risk)
            series[name][index] = answer.runtime_s
            if name + BOUND_SUFFIX in series:
                series[name + BOUND_SUFFIX][index] = answer.bound_s
        heapq.heappush(running, (end_time(job), index))
        if progress is not None and (index % 500 == 0 or index == total - 1):
            progress(index + 1, total)
    runtime = np.maximum(np.fromiter((j.runtime_s for j in ordered), float, total), 1.0)
    within = np.fromiter((not j.censored for j in ordered), bool, total)
    return ReplayResult(runtime, within, series)


def score_series(predicted: np.ndarray, runtime: np.ndarray, within: np.ndarray) -> Scores:
    """The issue's metrics for one series."""
    if len(runtime) == 0:
        return Scores(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    predicted = np.maximum(predicted, 1.0)
    accuracy = np.minimum(predicted, runtime) / np.maximum(predicted, runtime)
    under = predicted < runtime
    return Scores(
        n=int(len(runtime)),
        accuracy=float(accuracy.mean()),
        under_rate=float(under.mean()),
        kill_rate=float(under[within].mean()) if within.any() else math.nan,
        median_ratio=float(np.median(predicted / runtime)),
        mae_s=float(np.abs(predicted - runtime).mean()),
    )


def score(result: ReplayResult) -> dict[str, Scores]:
    """Scores of every series of a replay."""
    return {name: score_series(values, result.runtime_s, result.finished_within_request)
            for name, values in result.predictions.items()}


def evaluate_trace(jobs: Iterable[JobRecord], risk: float = 0.03,
                   predictors: dict[str, OnlinePredictor] | None = None,
                   progress: Callable[[int, int], None] | None = None) -> dict[str, Scores]:
    """Replay with every predictor (default: baselines + ours) and score."""
    return score(replay(jobs, predictors or default_predictors(), risk, progress))
