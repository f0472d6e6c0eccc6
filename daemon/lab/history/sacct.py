"""Parse Slurm accounting output: ``sacct --json``, ``sacct -P`` and sacct-like CSV.

All three yield :class:`JobRecord` per *job allocation*; job steps (``123.batch``,
``123.0``, ``123.extern``) are skipped. Times are taken as given: JSON gives Unix seconds,
text timestamps without a zone are read as UTC. The application key is the job name.

>>> text = "JobID|User|JobName|Submit|Start|End|Elapsed|Timelimit|State|NCPUS\\n"
>>> text += "7|ann|lmp|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T01:01:00|01:00:00|02:00:00|COMPLETED|4\\n"
>>> text += "7.batch|ann|batch|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T01:01:00|01:00:00||COMPLETED|4\\n"
>>> [(j.job_id, j.application, j.runtime_s, j.requested_time_s) for j in read_sacct_parsable(text)]
[('7', 'lmp', 3600.0, 7200.0)]
"""
from __future__ import annotations

import csv
import io
import json
import logging
import re
from datetime import datetime, timezone

from ...errors import ParseError
from ...records import TIMEOUT, UNKNOWN, JobRecord

logger = logging.getLogger(__name__)

_STEP = re.compile(r"^\d+(_\d+|_\[[^\]]*\]|\+\d+)?\.")  # 123.batch, 123_4.0, 123+1.extern
_UNLIMITED = {"UNLIMITED", "PARTITION_LIMIT", "INFINITE", "NONE", ""}


def parse_duration(text: str, *, minutes_default: bool = False, source: str = "", line: int = 0,
                   field: str = "") -> float:
    """Slurm duration -> seconds. Accepts ``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS(.ms)``, and
    with ``minutes_default`` the sbatch forms ``MM`` / ``D-HH`` / ``D-HH:MM``.
    "UNLIMITED"/"Partition_Limit"/"" -> 0 (no limit known)."""
    value = text.strip()
    if value.upper() in _UNLIMITED:
        return 0.0
    days, _, clock = value.rpartition("-") if "-" in value else ("", "", value)
    parts = clock.split(":")
    try:
        if days and not days.isdigit() or len(parts) > 3 or not all(parts):
            raise ValueError(value)
        numbers = [float(p) for p in parts]
        if any(n < 0 for n in numbers) or any("." in p for p in parts[:-1]):
            raise ValueError(value)
    except ValueError as error:
        raise ParseError(f"bad duration in {field or 'field'}", source=source, line=line, part=text) from error
    day_s = int(days) * 86400.0 if days else 0.0
    if days:                               # D-HH, D-HH:MM, D-HH:MM:SS
        numbers += [0.0] * (3 - len(numbers))
        return day_s + numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
    if len(numbers) == 3:                  # HH:MM:SS
        return numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
    if len(numbers) == 2:                  # MM:SS(.ms)
        return numbers[0] * 60 + numbers[1]
    return numbers[0] * 60 if minutes_default else numbers[0]


def parse_timestamp(text: str, *, source: str = "", line: int = 0, field: str = "") -> float:
    """ISO-like timestamp (``2024-01-01T10:00:00`` or with a space) -> Unix seconds (UTC when
    no zone is given); "Unknown"/"None"/"" -> -1."""
    value = text.strip()
    if value in ("", "Unknown", "None", "N/A"):
        return -1.0
    if re.fullmatch(r"-?\d+(\.\d+)?", value):
        return float(value)
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError as error:
        raise ParseError(f"bad timestamp in {field or 'field'}", source=source, line=line, part=text) from error
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.timestamp()


def job_state(text: str) -> str:
    """"CANCELLED by 123" -> CANCELLED; "" -> UNKNOWN."""
    word = text.strip().split(" ")[0].upper() if text.strip() else UNKNOWN
    return word.rstrip("+")


def _int(text: str, *, source: str, line: int, field: str) -> int:
    value = text.strip()
    if not value:
        return 0
    try:
        return int(float(value))
    except ValueError as error:
        raise ParseError(f"bad integer in {field}", source=source, line=line, part=text) from error


def accounting_record(job_id, user, submit, start, end, runtime, requested, name, state, **extra) -> JobRecord:
    """One accounting row's fields -> a record, by the rules every accounting reader shares: the
    runtime from start/end when elapsed is missing; a COMPLETED job that reached its limit is a TIMEOUT."""
    if runtime < 0 and start >= 0 and end >= start:
        runtime = end - start
    if state == "COMPLETED" and requested > 0 and runtime >= requested:
        state = TIMEOUT
    return JobRecord(job_id=job_id, user=user, submit_time=submit, runtime_s=runtime,
                     requested_time_s=requested, application=name, job_name=name,
                     start_time=start, end_time=end, state=state, **extra)


# ---------------------------------------------------------------- sacct -P (parsable)
_PARSABLE_ALIASES = {"jobidraw": "jobid", "ncpus": "cpus", "alloccpus": "cpus", "reqcpus": "reqcpus"}


def read_sacct_parsable(text: str, source: str = "") -> list[JobRecord]:
    """``sacct -P -o JobID,User,...`` output with its header line (``|``-separated)."""
    lines = text.splitlines()
    if not lines or "|" not in lines[0] and lines[0].strip().lower() not in ("jobid", "jobidraw"):
        raise ParseError("missing sacct -P header line", source=source, line=1,
                         part=lines[0][:80] if lines else "")
    header = [_PARSABLE_ALIASES.get(h.strip().lower(), h.strip().lower()) for h in lines[0].split("|")]
    if "jobid" not in header:
        raise ParseError("header has no JobID column", source=source, line=1, part=lines[0][:80])
    jobs: list[JobRecord] = []
    for number, raw in enumerate(lines[1:], start=2):
        if not raw.strip():
            continue
        cells = raw.split("|")
        if len(cells) < len(header):
            raise ParseError(f"expected {len(header)} columns, got {len(cells)}", source=source,
                             line=number, part=raw[:80])
        row = dict(zip(header, cells))
        if _STEP.match(row["jobid"].strip()):
            continue
        jobs.append(_parsable_row(row, source, number))
    return jobs


def _parsable_row(row: dict[str, str], source: str, line: int) -> JobRecord:
    get = row.get
    stamp = lambda key: parse_timestamp(get(key, ""), source=source, line=line, field=key)  # noqa: E731
    if get("elapsedraw", "").strip():
        runtime = float(_int(row["elapsedraw"], source=source, line=line, field="ElapsedRaw"))
    elif get("elapsed", "").strip():
        runtime = parse_duration(row["elapsed"], source=source, line=line, field="Elapsed")
    else:
        runtime = -1.0
    if get("timelimitraw", "").strip().isdigit():
        requested = 60.0 * int(row["timelimitraw"])
    else:
        requested = parse_duration(get("timelimit", ""), minutes_default=True, source=source, line=line,
                                   field="Timelimit")
    exit_code = get("exitcode", "0:0").split(":")[0]
    cpus = _int(get("reqcpus", "") or get("cpus", ""), source=source, line=line, field="NCPUS")
    return accounting_record(
        row["jobid"].strip(), get("user", "").strip(), stamp("submit"), stamp("start"), stamp("end"),
        runtime, requested, get("jobname", "").strip(), job_state(get("state", "")),
        group=get("group", "").strip(), account=get("account", "").strip(),
        partition=get("partition", "").strip(), qos=get("qos", "").strip(),
        nodes=_int(get("nnodes", ""), source=source, line=line, field="NNodes"),
        requested_procs=cpus, allocated_procs=_int(get("cpus", ""), source=source, line=line, field="NCPUS"),
        exit_code=_int(exit_code, source=source, line=line, field="ExitCode"),
    )


# ---------------------------------------------------------------- sacct --json
def _num(value, default=-1.0) -> float:
    """A plain number, or Slurm >= 23.02's {"set", "infinite", "number"} wrapper."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return default
        value = value.get("number", default)
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, (int, float)):
        return float(value)
    raise TypeError(f"not a number: {value!r}")


def read_sacct_json(text: str, source: str = "") -> list[JobRecord]:
    """``sacct --json`` (Slurm 22.05 shape; 23.02+ number wrappers accepted too)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseError(f"invalid JSON: {error.msg}", source=source, line=error.lineno,
                         part=text[error.pos:error.pos + 40]) from error
    jobs_in = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs_in, list):
        raise ParseError('no "jobs" list in sacct JSON', source=source, part=str(type(document).__name__))
    jobs: list[JobRecord] = []
    for index, job in enumerate(jobs_in):
        try:
            jobs.append(_json_job(job))
        except (TypeError, KeyError, ValueError, AttributeError) as error:
            raise ParseError(f"job #{index}: {error}", source=source,
                             part=str(job.get("job_id", "?") if isinstance(job, dict) else job)[:40]) from error
    return jobs


def _json_job(job: dict) -> JobRecord:
    times = job.get("time", {})
    state = job.get("state", {}).get("current", UNKNOWN)
    if isinstance(state, list):
        state = state[0] if state else UNKNOWN
    limit_min = _num(times.get("limit"), 0.0)
    exit_code = job.get("exit_code", {})
    if isinstance(exit_code, dict):
        exit_code = _num(exit_code.get("return_code"), 0.0)
    required = job.get("required", {}) or {}
    cpus = int(_num(required.get("CPUs"), 0.0))
    name = str(job.get("name", ""))
    return accounting_record(
        str(job["job_id"]), str(job.get("user", "")), _num(times.get("submission")),
        _num(times.get("start")), _num(times.get("end")), _num(times.get("elapsed")),
        60.0 * limit_min if limit_min > 0 else 0.0, name, job_state(str(state)),
        group=str(job.get("group", "")), account=str(job.get("account", "")),
        partition=str(job.get("partition", "")), qos=str(job.get("qos", "")),
        nodes=int(_num(job.get("allocation_nodes"), 0.0)), requested_procs=cpus,
        exit_code=int(_num(exit_code, 0.0)),
    )


# ---------------------------------------------------------------- sacct-like CSV (NREL Eagle)
_CSV_REQUIRED = ("job_id", "user", "submit_time", "run_time", "wallclock_req")


def read_sacct_csv(text: str, source: str = "") -> list[JobRecord]:
    """The NREL Eagle sacct-like CSV (job_id,user,account,partition,qos,wallclock_req [s],
    nodes_req,processors_req,...,submit_time,start_time,end_time,run_time [s],state,name,...)."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in _CSV_REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise ParseError(f"CSV header lacks column(s) {', '.join(missing)}", source=source, line=1,
                         part=",".join(reader.fieldnames or [])[:80])
    jobs: list[JobRecord] = []
    for row in reader:
        line = reader.line_num
        if None in row or any(v is None for v in row.values()):
            raise ParseError("wrong number of columns", source=source, line=line, part=str(row)[:80])
        if _STEP.match(row["job_id"].strip()):
            continue
        try:
            runtime = float(row["run_time"]) if row["run_time"].strip() else -1.0
            requested = float(row["wallclock_req"]) if row["wallclock_req"].strip() else 0.0
        except ValueError as error:
            raise ParseError("run_time / wallclock_req is not a number", source=source, line=line,
                             part=f"{row['run_time']},{row['wallclock_req']}") from error
        stamp = lambda key: parse_timestamp(row.get(key) or "", source=source, line=line, field=key)  # noqa: E731
        jobs.append(accounting_record(
            row["job_id"].strip(), row["user"].strip(), stamp("submit_time"), stamp("start_time"),
            stamp("end_time"), runtime, requested, (row.get("name") or "").strip(),
            job_state(row.get("state") or ""),
            account=(row.get("account") or "").strip(), partition=(row.get("partition") or "").strip(),
            qos=(row.get("qos") or "").strip(),
            nodes=_int(row.get("nodes_req") or "", source=source, line=line, field="nodes_req"),
            requested_procs=_int(row.get("processors_req") or "", source=source, line=line,
                                 field="processors_req"),
        ))
    return jobs
