"""The forecast computed in a process of its own: ``python -m hpcpredict.daemon.forecast.worker``.

The daemon's thread (:mod:`.keeper`) writes the snapshot (and a job not yet submitted) as JSON
on stdin and reads the forecasts back from stdout. The runs are seconds of pure Python: in the
daemon they would hold its interpreter lock against the hook's Predict on the local socket
(measured: p99 at 500 requests/s from 51 to 155 ms with a 2,000-job queue refreshed every second,
``benchmarks run hook_forecast``); here they cost the daemon one JSON decode, and run in the kernel's idle scheduling class
(SCHED_IDLE; nice 10 where it is refused): the CPU they take is CPU nothing else wanted, so on a
busy controller the forecast waits, never the hook. With ``probes`` (``[forecast] sbatch_line``)
it forecasts each probe job alone instead (:mod:`.probes`).
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, fields

from . import probes as probe_grid, simulate
from .types import QueuedJob, QueueSnapshot, RuntimeBelief, StartForecast

NICE = 10


#: A job on the wire: its fields in the contract's order, the belief last as [median_s, log_sigma]
_FIELDS = tuple(f.name for f in fields(QueuedJob) if f.name != "belief")


def _row(job: QueuedJob) -> list:
    belief = job.belief
    return [*(getattr(job, name) for name in _FIELDS), [belief.median_s, belief.log_sigma] if belief else None]


def _job(row: list) -> QueuedJob:
    *values, belief = row
    return QueuedJob(**dict(zip(_FIELDS, values)), belief=RuntimeBelief(*belief) if belief else None)


#: The last snapshot's jobs as JSON: a refresh's forecast and its probes (and the hypothetical
#: forecasts until the next read) send the same queue, and json.dumps holds the daemon's
#: interpreter lock for its whole length (2,000 jobs: ~13 ms measured under load)
_encoded: tuple[QueueSnapshot, str] | None = None


def _jobs_json(snapshot: QueueSnapshot) -> str:
    global _encoded
    cached = _encoded
    if cached is not None and cached[0] is snapshot:
        return cached[1]
    text = json.dumps([_row(job) for job in snapshot.jobs])
    _encoded = (snapshot, text)
    return text


def encode(snapshot: QueueSnapshot, runs: int, extra: QueuedJob | None = None,
           probes: list[QueuedJob] | None = None, budget_s: float = 0.0) -> str:
    """``probes``: forecast each of them alone (:func:`.probes.forecast_probes`, within ``budget_s``)
    in place of the queue's own forecast."""
    # the recent submissions (the arrivals' source) are bounded by the keeper (and refused by the
    # forecast above simulate.MAX_RECENT): ~120 bytes a row
    head = json.dumps({"taken_s": snapshot.taken_s, "total_cpus": snapshot.total_cpus,
                       "planning_rule": snapshot.planning_rule, "runs": runs, "extra": _row(extra) if extra else None,
                       "recent": [_row(job) for job in snapshot.recent], "recent_from_s": snapshot.recent_from_s,
                       "probes": [_row(job) for job in probes or ()], "budget_s": budget_s})
    return head[:-1] + ', "jobs": ' + _jobs_json(snapshot) + "}"


def decode_request(text: str) -> tuple[QueueSnapshot, int, QueuedJob | None]:
    data = json.loads(text)
    snapshot = QueueSnapshot(taken_s=data["taken_s"], total_cpus=data["total_cpus"],
                             planning_rule=data["planning_rule"], jobs=tuple(_job(row) for row in data["jobs"]),
                             recent=tuple(_job(row) for row in data.get("recent", ())),
                             recent_from_s=data.get("recent_from_s"))
    return snapshot, int(data["runs"]), _job(data["extra"]) if data["extra"] else None


def decode_reply(text: str) -> dict[str, StartForecast]:
    return {job_id: StartForecast(**values) for job_id, values in json.loads(text).items()}


def lower_priority() -> str:
    """This process in SCHED_IDLE (any user may move itself there), else nice :data:`NICE`;
    returns which it got."""
    try:
        os.nice(NICE)
    except OSError:
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return "idle"
    except (AttributeError, OSError):
        return "nice"


def main() -> int:
    lower_priority()
    text = sys.stdin.read()
    snapshot, runs, extra = decode_request(text)
    data = json.loads(text)
    if data.get("probes"):
        answer = probe_grid.forecast_probes(snapshot, [_job(row) for row in data["probes"]], runs=runs,
                                            budget_s=float(data["budget_s"]))
    else:
        answer = simulate.forecast_starts(snapshot, runs=runs, extra=extra)
    json.dump({job_id: asdict(forecast) for job_id, forecast in answer.items()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
