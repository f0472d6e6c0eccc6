"""Parse Standard Workload Format (SWF) traces from the Parallel Workloads Archive.

One job per line, 18 whitespace-separated numeric fields, ``-1`` = unknown; header and comment
lines start with ``;``. Fields used (1-based): 1 job, 2 submit, 3 wait, 4 run time,
5 allocated procs, 8 requested procs, 9 requested time, 11 status, 12 user, 13 group,
14 executable, 15 queue, 16 partition. Times in the lines count from the header's
``UnixStartTime`` (seconds since 1970, UTC); the records carry them as Unix times, so a
trace's jobs have their real dates (``report --since``, the hour and weekday features).

>>> jobs = read_swf("; Version: 2.2\\n1 0 10 3600 8 -1 -1 8 7200 -1 1 3 2 -1 1 -1 -1 -1\\n")
>>> jobs[0].user, jobs[0].runtime_s, jobs[0].requested_time_s, jobs[0].state
('3', 3600.0, 7200.0, 'COMPLETED')
>>> read_swf("; UnixStartTime: 843480031\\n1 5 10 3600 8 -1 -1 8 7200 -1 1 3 2 -1 1 -1 -1 -1\\n")[0].submit_time
843480036.0
"""
from __future__ import annotations

import logging
import math

from ...errors import ParseError
from ...records import CANCELLED, COMPLETED, FAILED, TIMEOUT, UNKNOWN, JobRecord

logger = logging.getLogger(__name__)

SWF_FIELDS = 18
# SWF status codes (field 11) -> Slurm-style final states.
_STATUS = {1: COMPLETED, 0: FAILED, 5: CANCELLED}


def _number(text: str, *, source: str, line: int, name: str) -> float:
    try:
        value = float(text)
    except ValueError as error:
        raise ParseError(f"field {name} is not a number", source=source, line=line, part=text) from error
    if not math.isfinite(value):
        raise ParseError(f"field {name} is not finite", source=source, line=line, part=text)
    return value


def _ident(value: float) -> str:
    """User/group/executable numbers as text; -1 (unknown) becomes ""."""
    if value < 0:
        return ""
    return str(int(value)) if value == int(value) else repr(value)


def parse_swf_line(text: str, *, source: str = "", line: int = 0, start_time: float = 0.0) -> JobRecord:
    """One SWF data line -> JobRecord, its times offset by the trace's ``start_time`` (its
    header's UnixStartTime); raises ParseError naming the bad field."""
    parts = text.split()
    if len(parts) < 11:
        raise ParseError(f"expected {SWF_FIELDS} fields, got {len(parts)}", source=source, line=line,
                         part=text.strip()[:80])
    parts = parts + ["-1"] * (SWF_FIELDS - len(parts))
    names = ("job", "submit", "wait", "run time", "allocated procs", "cpu time", "memory",
             "requested procs", "requested time", "requested memory", "status", "user", "group",
             "executable", "queue", "partition", "preceding job", "think time")
    values = [_number(p, source=source, line=line, name=f"{i + 1} ({names[i]})")
              for i, p in enumerate(parts[:SWF_FIELDS])]
    (job, submit, wait, run, alloc, _cpu, _mem, req_procs, req_time, _req_mem, status,
     user, group, executable, queue, partition) = values[:16]
    if submit < 0:
        raise ParseError("field 2 (submit) is unknown", source=source, line=line, part=parts[1])
    submit += start_time
    runtime = run if run >= 0 else -1.0
    requested = req_time if req_time > 0 else 0.0
    start = submit + max(wait, 0.0) if runtime >= 0 else -1.0
    end = start + runtime if runtime >= 0 else -1.0
    state = _STATUS.get(int(status), UNKNOWN)
    if runtime >= 0 and requested > 0 and runtime >= requested:
        state = TIMEOUT
    return JobRecord(
        job_id=_ident(job) or str(line),
        user=_ident(user),
        submit_time=submit,
        runtime_s=runtime,
        requested_time_s=requested,
        application=_ident(executable),
        group=_ident(group),
        partition=_ident(partition),
        qos=_ident(queue),
        requested_procs=int(max(req_procs, 0)),
        allocated_procs=int(max(alloc, 0)),
        start_time=start,
        end_time=end,
        state=state,
    )


def read_swf(text: str, source: str = "", *, strict: bool = False) -> list[JobRecord]:
    """All jobs of an SWF trace. Malformed lines are skipped with a counted warning
    (``strict=True`` raises the first one as ParseError instead)."""
    jobs: list[JobRecord] = []
    skipped: list[ParseError] = []
    start_time = 0.0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            key, _, value = stripped[1:].partition(":")
            if key.strip() == "UnixStartTime" and not jobs:
                try:
                    start_time = float(value)
                    if not (math.isfinite(start_time) and start_time >= 0):
                        raise ValueError(value)
                except ValueError:
                    start_time = 0.0
                    logger.warning("%s line %d: UnixStartTime %r is not a number: times kept as in the "
                                   "trace (from 1970)", source or "swf", number, value.strip()[:40])
            continue
        try:
            jobs.append(parse_swf_line(stripped, source=source, line=number, start_time=start_time))
        except ParseError as error:
            if strict:
                raise
            skipped.append(error)
    if skipped:
        logger.warning("%s: skipped %d malformed SWF line(s); first: %s",
                       source or "swf", len(skipped), skipped[0])
    if not jobs and skipped:
        raise skipped[0]
    return jobs
