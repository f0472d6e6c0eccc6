"""Finished jobs from Slurm accounting through pyslurm's database API (``pyslurm.db``).

The same :class:`JobRecord` as ``sacct --json`` (:func:`.sacct.read_sacct_json`), field for
field: both read the slurmdbd's job records, and :func:`records_from_pyslurm_jobs` maps the
attributes pyslurm documents for ``pyslurm.db.Job`` onto the fields the JSON reader fills, with
the same rules (``.sacct.accounting_record``: runtime from start/end when elapsed is missing, a
COMPLETED job that reached its limit is a TIMEOUT). Where pyslurm turns the database's 0
("not set") into None, the record keeps 0 as ``sacct --json`` prints it.

=================  ==========================  =================================
JobRecord          pyslurm.db.Job              sacct --json (22.05)
=================  ==========================  =================================
job_id             id                          job_id
user / group       user_name / group_name      user / group
submit/start/end   submit/start/end_time       time.submission/start/end
runtime_s          elapsed_time                time.elapsed
requested_time_s   time_limit (min) * 60       time.limit (min) * 60
state              state                       state.current
nodes              num_nodes                   allocation_nodes
requested_procs    cpus                        required.CPUs
exit_code          exit_code                   exit_code.return_code
=================  ==========================  =================================

``cpus`` is the allocated CPU count of a job that ran (its TRES), ``required.CPUs`` the
requested one; Slurm allocates what was requested unless a whole node was given (``--exclusive``),
where pyslurm's count is the node's.

>>> from types import SimpleNamespace as Job
>>> job = Job(id=7, name="lmp", user_name="ann", group_name="ann", account="a", partition="p",
...           qos="normal", submit_time=1000, start_time=1060, end_time=4660, elapsed_time=3600,
...           time_limit=120, state="COMPLETED", num_nodes=1, cpus=4, exit_code=0)
>>> [(r.job_id, r.runtime_s, r.requested_time_s, r.state) for r in records_from_pyslurm_jobs([job])]
[('7', 3600.0, 7200.0, 'COMPLETED')]
"""
from __future__ import annotations

import logging
import re
import time
from datetime import datetime

from ...errors import CommandError, ParseError
from ...records import UNKNOWN, JobRecord
from .sacct import accounting_record, job_state

logger = logging.getLogger(__name__)

_RELATIVE = re.compile(r"^now(?:([+-])(\d+)(seconds|minutes|hours|days|weeks)?)?$", re.IGNORECASE)
_UNIT_S = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 7 * 86400}


def since_timestamp(text: str, now: float | None = None) -> float:
    """A ``sacct -S`` value -> Unix seconds: ``now``, ``now-7days`` (seconds, minutes, hours,
    days, weeks; seconds without a unit) or ``YYYY-MM-DD[THH:MM[:SS]]`` in local time, as
    sacct reads it.

    >>> since_timestamp("now-2hours", now=10000.0)
    2800.0
    """
    value = text.strip()
    now = time.time() if now is None else now
    relative = _RELATIVE.match(value)
    if relative:
        sign, count, unit = relative.groups()
        if not sign:
            return now
        offset = int(count) * _UNIT_S[(unit or "seconds").lower()]
        return now - offset if sign == "-" else now + offset
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError as error:
        raise ParseError("--since for the pyslurm source must be now[-N{seconds|minutes|hours|days|weeks}] "
                         "or YYYY-MM-DD[THH:MM[:SS]]", source="--since", part=text) from error


def load_pyslurm_jobs(pyslurm, *, since: float, until: float, cluster: str = "") -> list:
    """``pyslurm.db.Jobs.load`` of every user's jobs active between ``since`` and ``until`` on
    ``cluster`` (the local cluster when ""). A failure of the call is a :class:`CommandError`."""
    what = ["pyslurm.db.Jobs.load", f"start_time={int(since)}", f"end_time={int(until)}"]
    if cluster:
        what.append(f"clusters={cluster}")
    started = time.monotonic()
    try:
        db_filter = pyslurm.db.JobFilter(start_time=int(since), end_time=int(until),
                                         clusters=[cluster] if cluster else None)
        loaded = pyslurm.db.Jobs.load(db_filter)
        # pyslurm 23.02+ returns a multi-cluster mapping (cluster -> id -> job), older releases a list.
        jobs = list(loaded.values()) if hasattr(loaded, "values") else list(loaded)
    except Exception as error:  # noqa: BLE001 - pyslurm raises RPCError and plain errors alike
        raise CommandError(what, None, message=f"{type(error).__name__}: {error}") from error
    logger.info("%s: %d jobs in %.2f s", " ".join(what), len(jobs), time.monotonic() - started)
    return jobs


def records_from_pyslurm_jobs(jobs, source: str = "pyslurm") -> list[JobRecord]:
    """``pyslurm.db.Job`` objects -> records, as :func:`.sacct.read_sacct_json` makes them."""
    records = []
    for index, job in enumerate(jobs):
        try:
            records.append(_pyslurm_job(job))
        except (TypeError, ValueError, AttributeError) as error:
            raise ParseError(f"job #{index}: {error}", source=source,
                             part=str(getattr(job, "id", "?"))[:40]) from error
    return records


def _value(job, name: str):
    """An attribute; a method is called (some pyslurm releases left ``group_name`` one)."""
    value = getattr(job, name)
    return value() if callable(value) else value


def _number(value, name: str) -> float:
    """pyslurm's None ("not set") -> 0, as sacct --json prints the database's value."""
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} is not a number: {value!r}")
    return float(value)


def _text(value) -> str:
    return "" if value is None else str(value)


def _pyslurm_job(job) -> JobRecord:
    limit = _value(job, "time_limit")
    # Minutes; None or a word ("PartitionLimit", "UNLIMITED") when the job had no limit of its own.
    limit_min = 0.0 if limit is None or isinstance(limit, str) else _number(limit, "time_limit")
    name = _text(_value(job, "name"))
    return accounting_record(
        str(int(_value(job, "id"))), _text(_value(job, "user_name")),
        _number(_value(job, "submit_time"), "submit_time"), _number(_value(job, "start_time"), "start_time"),
        _number(_value(job, "end_time"), "end_time"), _number(_value(job, "elapsed_time"), "elapsed_time"),
        60.0 * limit_min if limit_min > 0 else 0.0, name, job_state(_text(_value(job, "state")) or UNKNOWN),
        group=_text(_value(job, "group_name")), account=_text(_value(job, "account")),
        partition=_text(_value(job, "partition")), qos=_text(_value(job, "qos")),
        nodes=int(_number(_value(job, "num_nodes"), "num_nodes")),
        requested_procs=int(_number(_value(job, "cpus"), "cpus")),
        exit_code=int(_number(_value(job, "exit_code"), "exit_code")),
    )
