"""The 80 % interval calibrated from realized errors (split-conformal, on the forecasts whose
jobs have since started).

The forward runs' 10th-90th percentile interval misses more than 20 % of starts: what it does
not model (the real later submissions, partitions, the order changing) adds error the runs do
not see. Each forecast whose job has started gives two scores, how far its start fell beyond
each end of the interval, in units of the forecast's wait (``median - taken``, at least
:data:`MIN_SCALE_S`; waits range from minutes to days): ``(start - high) / scale`` and
``(low - start) / scale``, negative inside. A new forecast's ends move by the 90th percentile
of each side's last :data:`MAX_SCORES` scores (times its own scale): out when too many fell
beyond, in when too few, so each side misses about 10 % (conformalized quantile regression,
Romano et al. 2019, one-sided per end). Below :data:`MIN_SCORES` realized forecasts the interval
is left as the runs give it. The median is not moved.

Only forecasts whose job has started when the new one is made count (the replay: earlier ones
only, never a later job's start); the window is bounded, the memory O(:data:`MAX_SCORES`).

>>> calibration = IntervalCalibration()
>>> for i in range(200):       # every start came 1.5 waits past the high end: the interval moves up
...     calibration.add(StartForecast("j", 1000.0, 900.0, 1100.0, None, 32), taken_s=0.0, start_s=1100.0 + 1500.0)
>>> widened = calibration.adjust(StartForecast("k", 2000.0, 1900.0, 2100.0, None, 32), taken_s=1000.0)
>>> widened.low80_start_s, widened.median_start_s, widened.high80_start_s
(2000.0, 2000.0, 3600.0)
"""
from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import replace

from .types import StartForecast

MAX_SCORES = 1000      # the last realized forecasts used (a few days of a busy cluster's submissions)
MIN_SCORES = 50        # fewer: the interval as the runs give it
MIN_SCALE_S = 60.0     # a forecast wait below a minute is scaled as a minute
MISS_EACH_SIDE = 0.10  # the 80 % interval: 10 % beyond each end


def _scale(forecast: StartForecast, taken_s: float) -> float:
    return max(forecast.median_start_s - taken_s, MIN_SCALE_S)


class IntervalCalibration:
    """Realized scores in, calibrated intervals out (see the module's docstring)."""

    def __init__(self, max_scores: int = MAX_SCORES, min_scores: int = MIN_SCORES):
        self.min_scores = min_scores
        self._above: deque[float] = deque(maxlen=max_scores)
        self._below: deque[float] = deque(maxlen=max_scores)
        self._cached: tuple[float, float] | None = None
        self._lock = threading.Lock()      # the daemon adds on its keeper's thread, adjusts on request threads too

    def __len__(self) -> int:
        return len(self._above)

    def add(self, forecast: StartForecast, *, taken_s: float, start_s: float) -> None:
        """One realized forecast: made at ``taken_s`` (uncalibrated), its job started at ``start_s``."""
        scale = _scale(forecast, taken_s)
        above, below = (start_s - forecast.high80_start_s) / scale, (forecast.low80_start_s - start_s) / scale
        if math.isfinite(above) and math.isfinite(below):
            with self._lock:
                self._above.append(above)
                self._below.append(below)
                self._cached = None

    def shifts(self) -> tuple[float, float] | None:
        """How far (in waits) the low end moves down and the high end up; None: too few scores."""
        with self._lock:
            if len(self._above) < self.min_scores:
                return None
            if self._cached is None:
                self._cached = (_upper_quantile(self._below), _upper_quantile(self._above))
            return self._cached

    def adjust(self, forecast: StartForecast, taken_s: float) -> StartForecast:
        """``forecast`` (made at ``taken_s``) with its interval calibrated; as it is without enough scores."""
        shifts = self.shifts()
        if shifts is None:
            return forecast
        down, up = shifts
        scale = _scale(forecast, taken_s)
        median = forecast.median_start_s
        low = min(max(forecast.low80_start_s - down * scale, taken_s), median)
        high = max(forecast.high80_start_s + up * scale, median)
        return replace(forecast, low80_start_s=low, high80_start_s=high)


def _upper_quantile(scores) -> float:
    """The conformal (1 - MISS_EACH_SIDE) quantile: the ceil((n + 1)(1 - a))-th smallest score."""
    ordered = sorted(scores)
    rank = math.ceil((len(ordered) + 1) * (1.0 - MISS_EACH_SIDE))
    return ordered[min(rank, len(ordered)) - 1]


class FirstForecasts:
    """The daemon's source of realized errors: each pending job's first forecast (made when the
    keeper first saw it pending, as the replay's at its submission), scored once a later read
    shows it running. Remembered only while the job is in the queue (at most its size)."""

    def __init__(self, calibration: IntervalCalibration | None = None):
        self.calibration = calibration if calibration is not None else IntervalCalibration()
        self._first: dict[str, tuple[float, StartForecast]] = {}

    def observe(self, snapshot, forecasts: dict[str, StartForecast]) -> dict[str, StartForecast]:
        """Score the remembered jobs ``snapshot`` shows started, remember the new pending ones'
        ``forecasts`` (uncalibrated), and return ``forecasts`` calibrated."""
        present = {}
        for job in snapshot.jobs:
            present[job.job_id] = job
            first = self._first.get(job.job_id)
            if first is not None and job.start_s is not None:
                self.calibration.add(first[1], taken_s=first[0], start_s=job.start_s)
        self._first = {job_id: first for job_id, first in self._first.items()
                       if job_id in present and present[job_id].start_s is None}
        for job_id, forecast in forecasts.items():
            if job_id in present and job_id not in self._first:
                self._first[job_id] = (snapshot.taken_s, forecast)
        return {job_id: self.calibration.adjust(forecast, snapshot.taken_s) for job_id, forecast in forecasts.items()}
