"""The first working predictor: recent runtimes of the same user and application.

Point estimate: the mean of the user's last two runtimes of that application (Tsafrir et
al.), capped by the request. Upper bound: the empirical (1 - risk) quantile of the recent runs
padded by 10 %. Without any history :meth:`RecentHistoryModel.request_or_default` answers:
the user's own request (flagged as a fallback), and without a request the site default.
Trained models (``hpcpredict.daemon.history``) take over when published; this one stays as
their cold-start fallback.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from .estimates import RuntimeEstimate
from .records import JobRecord
from .timefmt import human_range


def _quantile(ordered: list[float], level: float) -> float:
    """numpy's default (linear) quantile of an already sorted list."""
    position = (len(ordered) - 1) * level
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


NEAR_REQUEST = 2.0     # runs that asked for within this factor of a job's request are "like it"
# Steady runs (RunsBasis.steady, hpcpredict.daemon.sources.compose): at least 2 of the last runs,
# none killed, the longest within 1.5 x the shortest. Holding their jobs' estimates to them
# cost 0.002 of mean accuracy on KTH-SP2, 0.012 on the HPC2N subset (spreads 1.1 ... 1.5 alike).
STEADY_RUNS = 2
STEADY_SPREAD = 1.5
RECENT_RUNS = 5        # "what the job needed": the longest of its last this many runs


@dataclass(frozen=True)
class RunsBasis:
    """The user's recent runs comparable to one job (:meth:`RecentHistoryModel.basis`): what its
    estimate and suggested --time are composed from (``hpcpredict.daemon.sources.compose``).
    Two requests with the same basis are the same job to the user's history."""

    runtimes: tuple[float, ...] = ()   # oldest first, at most the model's window
    requests: tuple[float, ...] = ()   # what each asked for (0: none)
    killed: bool = False               # one of the last RECENT_RUNS ended at its limit
    scope: str = ""                    # how to name them to the user, a template with {n}

    @property
    def recent(self) -> tuple[float, ...]:
        return self.runtimes[-RECENT_RUNS:]

    @property
    def needed_s(self) -> float:
        """What the runs say a limit must be: the longest of the last RECENT_RUNS (0: no runs)."""
        return max(self.recent, default=0.0)

    def bound_s(self, risk: float) -> float:
        """The runs' own upper bound at ``risk``: the empirical (1 - risk) quantile of the
        comparable runs padded by 10 %, 1.5 x the longest when one was killed at its limit (its
        true length is unknown). A function of the runs only, never of the request."""
        if not self.runtimes:
            return 0.0
        ordered = sorted(self.runtimes)
        bound = _quantile(ordered, 1.0 - risk) * 1.1
        return max(bound, ordered[-1] * 1.5) if self.killed else max(bound, self.needed_s)

    @property
    def steady(self) -> bool:
        """At least STEADY_RUNS of the last runs, none killed, the longest within STEADY_SPREAD of
        the shortest: runs that do not vary (KTH-SP2 user 91's 2.7 h, every time)."""
        recent = self.recent
        return len(recent) >= STEADY_RUNS and not self.killed and max(recent) <= STEADY_SPREAD * max(min(recent), 1.0)

    def named(self) -> str:
        return self.scope.format(n=len(self.recent))


class RecentHistoryModel:
    name = "recent-history"
    version = "1"

    def __init__(self, window: int = 20, default_runtime_s: float = 3600.0):
        self.window = window
        self.default_runtime_s = default_runtime_s
        self._by_user_app: dict[tuple[str, str], deque] = {}
        self._by_user: dict[str, deque] = {}

    def observe(self, record: JobRecord) -> None:
        if record.runtime_s <= 0:
            return
        # (runtime, killed at its limit, request, size): the last two pick the runs of "this job"
        entry = (float(record.runtime_s), bool(record.censored), float(record.requested_time_s), int(record.procs))
        key = (record.user, record.application)
        self._by_user_app.setdefault(key, deque(maxlen=self.window)).append(entry)
        self._by_user.setdefault(record.user, deque(maxlen=self.window)).append(entry)

    def history(self, user: str, application: str) -> list[float]:
        return [entry[0] for entry in self._by_user_app.get((user, application), ())]

    def runs(self, user: str, application: str, request_s: float = 0.0, procs: int = 0) -> tuple[list[float], str]:
        """The runtimes (oldest first) of the user's recent runs of *this job*, and how to name
        them to the user (a template with ``{n}``, the number of runs shown): :meth:`basis`."""
        basis = self.basis(user, application, request_s, procs)
        return list(basis.runtimes), basis.scope

    def basis(self, user: str, application: str, request_s: float = 0.0, procs: int = 0) -> RunsBasis:
        """The user's recent runs of *this job* (:class:`RunsBasis`).

        This job: the runs of ``application`` (else all the user's jobs), narrowed to those of
        the same size and then to those that asked for about as much time (within a factor of
        :data:`NEAR_REQUEST`), each narrowing only when some runs remain, so a job asking for
        less than its runs took still finds them. Reads only, like :meth:`predict`."""
        recent: Sequence[tuple[float, bool, float, int]] = tuple(self._by_user_app.get((user, application)) or ())
        scope = f"your last {{n}} runs of {application or 'this job'}"
        if not recent:
            recent = tuple(self._by_user.get(user) or ())
            scope = "your last {n} jobs"
        if procs > 0:
            same_size = [entry for entry in recent if entry[3] == procs]
            if same_size and len(same_size) < len(recent):
                recent, scope = same_size, scope + " of this size"
        if request_s > 0:
            near = [entry for entry in recent if request_s / NEAR_REQUEST <= entry[2] <= request_s * NEAR_REQUEST]
            if near and len(near) < len(recent):
                recent, scope = near, scope + " asking for about this much time"
        return RunsBasis(runtimes=tuple(entry[0] for entry in recent), requests=tuple(entry[2] for entry in recent),
                         killed=any(entry[1] for entry in recent[-RECENT_RUNS:]), scope=scope)

    def predict(self, job: JobRecord, risk: float = 0.03, soft_risk: float | None = None) -> RuntimeEstimate | None:
        """The estimate from this user's recent runs, or None when the user has none.

        Reads only, from any thread: each deque is copied in one step (``tuple``) before use,
        so a concurrent :meth:`observe` never breaks an iteration. ``soft_risk`` also fills
        ``soft_s``: the empirical (1 - soft_risk) quantile of the same runs."""
        request = float(job.requested_time_s or 0.0)
        recent = self._by_user_app.get((job.user, job.application))
        scope = f"your last {{n}} runs of {job.application or 'this job'}"
        if not recent:
            recent = self._by_user.get(job.user)
            scope = "your last {n} jobs (any application)"
        runs = tuple(recent or ())
        if not runs:
            return None
        # At most `window` values: plain Python beats numpy's per-call overhead here (~40x).
        runtimes = [entry[0] for entry in runs]
        ordered = sorted(runtimes)
        point = sum(runtimes[-2:]) / len(runtimes[-2:])
        bound = _quantile(ordered, 1.0 - risk) * 1.1
        if any(entry[1] for entry in runs):
            bound = max(bound, ordered[-1] * 1.5)  # a run was killed: its true length is unknown
        soft = _quantile(ordered, 1.0 - soft_risk) if soft_risk is not None else 0.0
        if request > 0:
            point, bound, soft = min(point, request), min(bound, request), min(soft, request)
        low, high = ordered[0], ordered[-1]
        text = scope.format(n=len(runtimes)) + ": " + human_range(low, high)
        return RuntimeEstimate(runtime_s=point, bound_s=max(bound, point), low_s=low, high_s=high, coverage=0.0,
                               explanation=(text,), model_name=self.name, model_version=self.version,
                               soft_s=max(soft, point) if soft_risk is not None else 0.0)

    def request_or_default(self, job: JobRecord) -> RuntimeEstimate:
        """The answer when no model knows the job: the user's request, else the site default
        (flagged as a fallback; reported under this model's name, as it always has been)."""
        request = float(job.requested_time_s or 0.0)
        base = request if request > 0 else self.default_runtime_s
        why = "no history for you yet: using your requested time" if request > 0 else \
            "no history and no requested time: using the site default"
        return RuntimeEstimate(runtime_s=base, bound_s=base, low_s=0.0, high_s=base, coverage=0.0,
                               explanation=(why,), fallback=True, model_name=self.name,
                               model_version=self.version)
