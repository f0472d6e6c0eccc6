"""Online walltime predictors: the interface, and the published baselines.

A predictor sees jobs *end* (:meth:`OnlinePredictor.observe`, in end-time order) and answers
for jobs at *submission* (:meth:`OnlinePredictor.predict`), with the product's one
:class:`~hpcpredict.daemon.estimates.RuntimeEstimate` (``bound_s``: the limit at the risk). Every baseline caps its estimate at
the user's request when one is given (the scheduler kills the job there anyway), and answers
the request itself (``fallback=True``) when the user has no ended job yet.

>>> from hpcpredict.daemon.records import JobRecord
>>> last2 = Last2Predictor()
>>> for n, runtime in enumerate((600.0, 1000.0)):
...     last2.observe(JobRecord(str(n), "ann", 0.0, runtime_s=runtime, requested_time_s=3600.0))
>>> last2.predict(JobRecord("9", "ann", 10.0, requested_time_s=3600.0)).runtime_s
800.0
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import deque
from typing import ClassVar

from ..estimates import RuntimeEstimate
from ..records import JobRecord

DEFAULT_NO_REQUEST_S = 3600.0  # answer when neither history nor a request exists


class OnlinePredictor(ABC):
    """A walltime predictor that learns as jobs end."""

    name: ClassVar[str]
    has_bound: ClassVar[bool] = False   # True when bound_s is a calibrated upper bound

    @abstractmethod
    def observe(self, record: JobRecord) -> None:
        """A job ended (called in end-time order)."""

    @abstractmethod
    def predict(self, job: JobRecord, risk: float = 0.03) -> RuntimeEstimate:
        """Answer for ``job`` at submission (its ``runtime_s`` is -1). Never changes the predictor."""

    def submit(self, job: JobRecord, risk: float = 0.03) -> RuntimeEstimate:
        """:meth:`predict` for a job being submitted: a predictor that scores its own answers
        when the job ends remembers this one (the baselines remember nothing)."""
        return self.predict(job, risk)


def cap(seconds: float, job: JobRecord) -> float:
    """Clamp to [1 s, request] (request only when given)."""
    if job.requested_time_s > 0:
        seconds = min(seconds, job.requested_time_s)
    return max(seconds, 1.0)


def point(name: str, seconds: float, job: JobRecord, explanation: str, fallback: bool = False) -> RuntimeEstimate:
    """A point-only answer (bound = point, no interval)."""
    value = cap(seconds, job)
    return RuntimeEstimate(runtime_s=value, bound_s=value, low_s=value, high_s=value, coverage=0.0,
                           explanation=(explanation,), fallback=fallback, model_name=name)


def request_answer(name: str, job: JobRecord) -> RuntimeEstimate:
    """The cold-start answer: the user's request (or a default when none)."""
    if job.requested_time_s > 0:
        return point(name, job.requested_time_s, job, "no history for this user: using the request", True)
    return point(name, DEFAULT_NO_REQUEST_S, job, "no history and no request: default 1 h", True)


class _PerUserRecent(OnlinePredictor):
    """Shared bookkeeping: the last ``depth`` ended jobs per user."""

    depth: ClassVar[int] = 2

    def __init__(self):
        self.recent: dict[str, deque[JobRecord]] = {}

    def observe(self, record: JobRecord) -> None:
        if record.runtime_s < 0:
            return
        self.recent.setdefault(record.user, deque(maxlen=self.depth)).append(record)


class UserRequestPredictor(OnlinePredictor):
    """The user's own request."""

    name = "user"

    def observe(self, record: JobRecord) -> None:
        pass

    def predict(self, job: JobRecord, risk: float = 0.03) -> RuntimeEstimate:
        if job.requested_time_s > 0:
            return point(self.name, job.requested_time_s, job, "the user's request")
        return request_answer(self.name, job)


class Last2Predictor(_PerUserRecent):
    """Tsafrir, Etsion & Feitelson (2007): mean of the user's last two runtimes, capped by the request."""

    name = "last2"
    depth = 2

    def predict(self, job: JobRecord, risk: float = 0.03) -> RuntimeEstimate:
        past = self.recent.get(job.user)
        if not past:
            return request_answer(self.name, job)
        mean = sum(r.runtime_s for r in past) / len(past)
        return point(self.name, mean, job, f"mean of the user's last {len(past)} runtimes")


def _ratio(record: JobRecord) -> float | None:
    if record.requested_time_s <= 0:
        return None
    return record.runtime_s / record.requested_time_s


class AleaMax5Predictor(_PerUserRecent):
    """ALEA: request x the max runtime/request ratio of the user's last 5 jobs."""

    name = "alea-max5"
    depth = 5
    padding_s = 0.0
    explain = "request x max runtime/request of the last {n} jobs"

    def predict(self, job: JobRecord, risk: float = 0.03) -> RuntimeEstimate:
        ratios = [r for r in map(_ratio, self.recent.get(job.user, ())) if r is not None]
        if not ratios or job.requested_time_s <= 0:
            return request_answer(self.name, job)
        return point(self.name, job.requested_time_s * max(ratios) + self.padding_s, job,
                     self.explain.format(n=len(ratios)))


class CesnetPredictor(AleaMax5Predictor):
    """CESNET softwalltime: the same rule over the last 15 jobs, + 900 s, capped by the request."""

    name = "cesnet"
    depth = 15
    padding_s = 900.0
    explain = "request x max ratio of the last {n} jobs + 15 min"


class EcmwfPredictor(OnlinePredictor):
    """ECMWF: mean + 1 sigma of earlier runs with the same user, job name and geometry."""

    name = "ecmwf"
    depth: ClassVar[int] = 20

    def __init__(self):
        self.runs: dict[tuple, deque[float]] = {}

    @staticmethod
    def _key(job: JobRecord) -> tuple:
        return (job.user, job.job_name or job.application, job.nodes, job.procs)

    def observe(self, record: JobRecord) -> None:
        if record.runtime_s >= 0:
            self.runs.setdefault(self._key(record), deque(maxlen=self.depth)).append(record.runtime_s)

    def predict(self, job: JobRecord, risk: float = 0.03) -> RuntimeEstimate:
        runs = self.runs.get(self._key(job))
        if not runs:
            return request_answer(self.name, job)
        mean = sum(runs) / len(runs)
        sigma = math.sqrt(sum((r - mean) ** 2 for r in runs) / len(runs))
        return point(self.name, mean + sigma, job, f"mean + 1 sigma of {len(runs)} runs with this name and size")


BASELINES: dict[str, type[OnlinePredictor]] = {
    cls.name: cls for cls in (UserRequestPredictor, Last2Predictor, AleaMax5Predictor,
                              CesnetPredictor, EcmwfPredictor)
}
