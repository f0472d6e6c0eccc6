"""What ``hpcpredict explain`` and ``hpcpredict report`` read of the store, gathered in one place
for both ways they are read: the store file directly (an admin on the controller) or the
daemon's ``JobRecord`` / ``UserReport`` calls (anyone, about their own jobs: the store is the
daemon's, private to it).

``reader``: the user name the rows are read for (an ordinary caller, as the kernel or MUNGE
named them), None for a privileged caller or the store's own reader (every user's rows). A
reader gets only their own rows; a job or a report of another user is refused, so explain
and report never show another user's jobs, names or scripts.

The wire codec (:func:`record_reply`, :func:`record_from_reply`, :func:`report_reply`,
:func:`report_from_reply`) is the one both ends use: JSON texts of the store's own rows, so
``explain`` and ``report`` print the same lines and ``--json`` keys either way.

Bounds (the daemon answers these for any user): the history of at most :data:`MAX_HISTORY`
jobs, the latest :data:`MAX_PREDICTIONS` predictions of a job, a report over the latest
:data:`MAX_REPORT_ROWS` ended jobs (the reply says so), each prediction's request without its
script and environment, and per ordinary uid :data:`RECORD_CALLS_PER_MINUTE` calls a minute
(a report costs :data:`REPORT_COST` of them).

The per-group suggestion of ``report`` (:func:`latest_suggestions`) is the --time the group's
latest job was told at submission, as stored (the sbatch line's and the job output's); only a
job with none stored (history ingested from accounting, or stored before the suggestion was
kept) gets what ``predict`` answers for it run again, and its basis says which.
"""
from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field

from .errors import HpcPredictError, PermissionDenied
from .jobspec import JobSpec
from .records import JobRecord
from .store import OUTCOME_COLUMNS, PredictionRow, job_from_row, job_values
from ..proto.v1 import hpcpredict_pb2 as pb

MAX_HISTORY = 50
MAX_PREDICTIONS = 100
MAX_REPORT_ROWS = 5_000
RECORD_CALLS_PER_MINUTE = 30
REPORT_COST = 5


@dataclass
class JobRecordData:
    """One job as stored: its job rows (dicts of ``JOB_ROW_COLUMNS``), its predictions and the
    last jobs of its user before it."""

    rows: list[dict]
    predictions: list[PredictionRow]
    history: list[JobRecord] = field(default_factory=list)


def read_job_record(store, job_id: str, *, cluster: str | None = None, history: int = 5,
                    reader: str | None = None) -> JobRecordData:
    """``job_id``'s record for ``reader`` (see the module doc); raises HpcPredictError when the
    store knows nothing of it, PermissionDenied when only another user's rows are stored."""
    rows = store.job_rows(job_id, cluster=cluster)
    foreign = reader is not None and any(row["user"] != reader for row in rows)
    if reader is not None:
        rows = [row for row in rows if row["user"] == reader]
    predictions = store.job_predictions(job_id, [row["prediction_id"] for row in rows], cluster=cluster)
    if reader is not None:
        foreign = foreign or any(row.user != reader for row in predictions)
        predictions = [row for row in predictions if row.user == reader]
    if not rows and not predictions:
        where = f" on cluster {cluster}" if cluster else ""
        if foreign:
            raise PermissionDenied(f"job {job_id}{where} is another user's: you ({reader}) may only read the "
                                   f"records of your own jobs")
        raise HpcPredictError(f"no job {job_id}{where} in the store (neither an outcome, history nor a prediction)")
    predictions = predictions[-MAX_PREDICTIONS:]
    ended = next((row for row in rows if row["source"] == "outcome"), rows[0] if rows else None)
    user = ended["user"] if ended else predictions[0].user
    before = ended["submit_time"] if ended and ended["submit_time"] >= 0 else predictions[0].created if predictions else 0.0
    past = store.user_history(user, before, max(0, min(int(history), MAX_HISTORY))) if user else []
    return JobRecordData(rows, predictions, past)


def _without_script(request: bytes) -> bytes:
    """A stored JobRequest without its script and environment (what explain never shows)."""
    if not request:
        return b""
    message = pb.JobRequest()
    try:
        message.ParseFromString(request)
    except Exception:       # a row the daemon cannot decode: explain says "undecodable"
        return b"\xff"
    message.ClearField("script")
    message.ClearField("environment")
    return message.SerializeToString()


def record_reply(data: JobRecordData) -> pb.JobRecordReply:
    predictions = []
    for row in data.predictions:
        entry = asdict(row)
        entry["request"] = base64.b64encode(_without_script(row.request)).decode()
        predictions.append(entry)
    return pb.JobRecordReply(job_rows_json=json.dumps(data.rows), predictions_json=json.dumps(predictions),
                             history_json=json.dumps([job_values(job) for job in data.history]))


def record_from_reply(reply: pb.JobRecordReply) -> JobRecordData:
    try:
        predictions = [PredictionRow(**{**entry, "request": base64.b64decode(entry["request"])})
                       for entry in json.loads(reply.predictions_json or "[]")]
        return JobRecordData(json.loads(reply.job_rows_json or "[]"), predictions,
                             [job_from_row(tuple(row)) for row in json.loads(reply.history_json or "[]")])
    except (ValueError, TypeError, KeyError) as error:
        raise HpcPredictError(f"JobRecord: the daemon's reply does not decode: {error}") from error


def read_report_rows(store, *, user: str | None = None, account: str | None = None, since: float | None = None,
                     cluster: str | None = None, reader: str | None = None, limit: int | None = None) -> list[tuple]:
    """Ended jobs for ``report`` (:data:`OUTCOME_COLUMNS` tuples, end-time order) as ``reader``
    may read them: their own only, refused when asking for another user's."""
    if reader is not None:
        if user and user != reader:
            raise PermissionDenied(f"report --user {user}: you ({reader}) may only report on your own jobs")
        user = reader
    return store.outcome_rows(user=user, account=account, since=since, cluster=cluster, limit=limit)


_USER, _ACCOUNT, _JOB_ID, _CLUSTER = (OUTCOME_COLUMNS.index(name) for name in ("user", "account", "job_id", "cluster"))
_SUGGESTED = OUTCOME_COLUMNS.index("suggested_time_limit_s")


def latest_suggestions(store, estimate, rows: list[tuple], by: str = "user") -> dict[str, tuple[int, str]]:
    """Per ``by`` group of ``rows`` (end-time order): (suggested --time s, its basis) for the
    group's latest job (see the module doc). ``estimate(spec)``: the engine's answer (its
    ``time_limit_s``), asked only for a latest job with no suggestion stored."""
    latest: dict[str, tuple] = {}
    for row in rows:
        latest[str(row[_USER if by == "user" else _ACCOUNT])] = row
    suggestions = {}
    for key, row in latest.items():
        if row[_SUGGESTED]:
            suggestions[key] = (int(row[_SUGGESTED]), f"job {row[_JOB_ID]}'s, as suggested at its submission")
            continue
        stored = [job for job in store.job_rows(str(row[_JOB_ID]), str(row[_CLUSTER])) if job["user"] == row[_USER]]
        if not stored:
            continue
        job = stored[-1]
        request = int(job["requested_time_s"] or 0)
        spec = JobSpec(user=job["user"], application=job["application"] or "", account=job["account"] or "",
                       partition=job["partition"] or "", cluster=job["cluster"] or "", nodes=int(job["nodes"] or 0),
                       ntasks=int(job["requested_procs"] or job["allocated_procs"] or 0), time_limit_s=max(request, 0))
        suggestions[key] = (int(estimate(spec).time_limit_s),
                            f"what predict suggests for job {row[_JOB_ID]} run again (none stored at its submission)")
    return suggestions


def report_reply(rows: list[tuple], suggestions: dict, rows_cap: int) -> pb.UserReportReply:
    return pb.UserReportReply(rows_json=json.dumps(rows), suggestions_json=json.dumps(suggestions),
                              rows_cap=rows_cap if len(rows) >= rows_cap else 0)


def report_from_reply(reply: pb.UserReportReply) -> tuple[list[tuple], dict[str, tuple[int, str]], int]:
    try:
        rows = [tuple(row) for row in json.loads(reply.rows_json or "[]")]
        suggestions = {key: (int(value[0]), str(value[1])) for key, value in json.loads(reply.suggestions_json or "{}").items()}
    except (ValueError, TypeError, IndexError) as error:
        raise HpcPredictError(f"UserReport: the daemon's reply does not decode: {error}") from error
    if any(len(row) != len(OUTCOME_COLUMNS) for row in rows):
        raise HpcPredictError("UserReport: the daemon's rows are not the report's columns (a daemon of another release?)")
    return rows, suggestions, reply.rows_cap
