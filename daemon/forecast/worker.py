"""The forecast computed in a process of its own: ``python -m hpcpredict.daemon.forecast.worker``.

The daemon's thread (:mod:`.keeper`) writes the snapshot (and a job not yet submitted) as JSON
on stdin and reads the forecasts back from stdout. The runs are seconds of pure Python: in the
daemon they would hold its interpreter lock against the hook's Predict on the local socket
(measured: p99 at 500 requests/s from 51 to 155 ms with a 2,000-job queue refreshed every second,
``benchmarks run hook_forecast``); here they cost the daemon one JSON decode, and run at a lower
CPU priority (nice 10) than the daemon's own threads.
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, fields

from . import simulate
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


def encode(snapshot: QueueSnapshot, runs: int, extra: QueuedJob | None = None) -> str:
    # the recent submissions (the arrivals' source) are bounded by the keeper (and refused by the
    # forecast above simulate.MAX_RECENT): ~120 bytes a row
    return json.dumps({"taken_s": snapshot.taken_s, "total_cpus": snapshot.total_cpus,
                       "planning_rule": snapshot.planning_rule, "jobs": [_row(job) for job in snapshot.jobs],
                       "recent": [_row(job) for job in snapshot.recent], "recent_from_s": snapshot.recent_from_s,
                       "runs": runs, "extra": _row(extra) if extra else None})


def decode_request(text: str) -> tuple[QueueSnapshot, int, QueuedJob | None]:
    data = json.loads(text)
    snapshot = QueueSnapshot(taken_s=data["taken_s"], total_cpus=data["total_cpus"],
                             planning_rule=data["planning_rule"], jobs=tuple(_job(row) for row in data["jobs"]),
                             recent=tuple(_job(row) for row in data.get("recent", ())),
                             recent_from_s=data.get("recent_from_s"))
    return snapshot, int(data["runs"]), _job(data["extra"]) if data["extra"] else None


def decode_reply(text: str) -> dict[str, StartForecast]:
    return {job_id: StartForecast(**values) for job_id, values in json.loads(text).items()}


def main() -> int:
    try:
        os.nice(NICE)
    except OSError:
        pass
    snapshot, runs, extra = decode_request(sys.stdin.read())
    answer = simulate.forecast_starts(snapshot, runs=runs, extra=extra)
    json.dump({job_id: asdict(forecast) for job_id, forecast in answer.items()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
