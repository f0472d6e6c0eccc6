"""The store's rows: how a job record and a prediction are written as table rows and read back.

One definition of each table's columns (in the order every INSERT and SELECT uses) and of the
codecs between rows and objects, shared by the SQLite store (:mod:`.sqlite`), the PostgreSQL
store (:mod:`.postgres`), their common lookups (:mod:`.lookups`) and the prediction
journal (which holds :func:`prediction_values` tuples). The column ``user`` is written quoted
(:func:`quoted`) where the SQL also runs on PostgreSQL: there a bare ``user`` is the session's
user name, not the column.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ..records import JobRecord

#: A ``predictions`` row's columns, in the order of :func:`prediction_values` and :class:`PredictionRow`.
PREDICTION_COLUMNS = ("prediction_id", "job_id", "stage", "user", "application", "created", "runtime_s", "low_s",
                      "high_s", "bound_s", "requested_time_s", "comm_time_s", "model_name", "model_version",
                      "fallback", "request", "cluster", "decided_time_limit_s", "decided_time_min_s", "policy_mode",
                      "policy_reason", "started_time_limit_s", "started_time_min_s", "suggested_time_limit_s")


def quoted(columns) -> str:
    """A column list for SQL, ``user`` quoted (see the module doc)."""
    return ", ".join(f'"{c}"' if c == "user" else c for c in columns)


@dataclass(frozen=True, slots=True)
class PredictionRow:
    """One ``predictions`` row: an answer as the store keeps it."""

    prediction_id: str
    job_id: str
    stage: str
    user: str
    application: str
    created: float
    runtime_s: float
    low_s: float
    high_s: float
    bound_s: float
    requested_time_s: float
    comm_time_s: float | None
    model_name: str
    model_version: str
    fallback: bool
    request: bytes = b""
    cluster: str = ""
    # What the daemon decided (answered), not what happened: at submission the limits it told
    # job_submit.lua to set, at allocation the TimeLimit it told PrologSlurmctld to set (None: keep).
    decided_time_limit_s: int | None = None
    decided_time_min_s: int | None = None
    policy_mode: str = ""                    # soft | bound | advise ("" = before modes, or not a submission)
    policy_reason: str = ""                  # daemon/policy's reason (LimitChange.reason)
    # What happened (allocation rows, read back from slurmctld by PrologSlurmctld; None: not read):
    # the TimeLimit the job started under (backfill may have lowered the submitted --time toward
    # its --time-min) and its TimeMin (what the hook or the user applied: Slurm never changes it).
    started_time_limit_s: int | None = None
    started_time_min_s: int | None = None
    # The --time the answer suggested (Estimate.suggested_time_limit_s: what the sbatch line and
    # the job output name); None: a row stored before it was kept.
    suggested_time_limit_s: int | None = None


def prediction_values(row: PredictionRow) -> tuple:
    """The ``predictions`` row (the INSERT's parameters; also what the journal stores)."""
    return (row.prediction_id, row.job_id, row.stage, row.user, row.application, row.created, row.runtime_s,
            row.low_s, row.high_s, row.bound_s, row.requested_time_s, row.comm_time_s, row.model_name,
            row.model_version, int(row.fallback), row.request, row.cluster, row.decided_time_limit_s,
            row.decided_time_min_s, row.policy_mode, row.policy_reason, row.started_time_limit_s,
            row.started_time_min_s, row.suggested_time_limit_s)


def prediction_for_job_where(job_id: str, since: float, cluster: str | None, user: str | None) -> tuple[str, tuple]:
    """WHERE clause (``?`` placeholders) and parameters of ``Store.prediction_for_job``."""
    where, params = "job_id = ? AND created >= ?", [job_id, since]
    if cluster is not None:
        where, params = where + " AND cluster = ?", [*params, cluster]
    if user is not None:
        where, params = where + ' AND "user" = ?', [*params, user]
    return where, tuple(params)


def prediction_from_values(values) -> PredictionRow:
    """Inverse of :func:`prediction_values` (also for a row read back from SQLite)."""
    values = list(values)
    values[14] = bool(values[14])
    values[15] = values[15] or b""
    return PredictionRow(*values)


#: A ``jobs`` row's record columns, in the order of :func:`job_values` and :func:`job_from_row`.
JOB_COLUMNS = ("job_id", "user", "grp", "account", "partition", "qos", "application", "job_name",
               "nodes", "requested_procs", "allocated_procs", "requested_time_s", "submit_time",
               "start_time", "end_time", "runtime_s", "state", "exit_code", "cluster", "inputs")


def job_values(record: JobRecord) -> tuple:
    """A record as its ``jobs`` row (:data:`JOB_COLUMNS`)."""
    return (str(record.job_id), record.user, record.group, record.account, record.partition, record.qos,
            record.application, record.job_name, int(record.nodes), int(record.requested_procs),
            int(record.allocated_procs), float(record.requested_time_s), float(record.submit_time),
            float(record.start_time), float(record.end_time), float(record.runtime_s), record.state,
            int(record.exit_code), record.cluster, json.dumps(record.inputs, sort_keys=True, default=str))


def job_from_row(row: tuple) -> JobRecord:
    """Inverse of :func:`job_values`."""
    (job_id, user, grp, account, partition, qos, application, job_name, nodes, requested_procs,
     allocated_procs, requested_time_s, submit_time, start_time, end_time, runtime_s, state,
     exit_code, cluster, inputs) = row
    return JobRecord(job_id=job_id, user=user, group=grp, account=account, partition=partition, qos=qos,
                     application=application, job_name=job_name, nodes=nodes,
                     requested_procs=requested_procs, allocated_procs=allocated_procs,
                     requested_time_s=requested_time_s, submit_time=submit_time, start_time=start_time,
                     end_time=end_time, runtime_s=runtime_s, state=state, exit_code=exit_code,
                     inputs=json.loads(inputs) if inputs and inputs != "{}" else {}, cluster=cluster)
