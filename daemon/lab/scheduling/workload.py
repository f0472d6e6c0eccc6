"""Jobs of a scheduling replay, and the machine size from an SWF header.

A job does at most ``work_s`` of work: its trace runtime, cut at the user's request when it
ran past it (it was killed there; what it would have done after is unknown). ``limit_s`` is
the ``--time`` a policy gives it and ``time_min_s`` its ``--time-min`` (0 = none); whether
that ``--time-min`` is soft is the cluster's setting (``daemon/scheduling/easy.simulate``), not the job's.

>>> machine_size("; MaxNodes: 100\\n; MaxProcs: 128\\n1 0 1 1 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\\n")
128
>>> from hpcpredict.daemon.records import JobRecord
>>> load = sim_jobs([JobRecord("1", "u", 0.0, runtime_s=90.0, requested_time_s=60.0,
...                                     requested_procs=4),
...                           JobRecord("2", "u", 5.0, runtime_s=10.0, requested_procs=500)], procs=100)
>>> load.jobs[0].work_s, load.jobs[0].limit_s, dict(load.dropped)
(60.0, 60.0, {'larger_than_machine': 1})
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable

from ...records import JobRecord
from ...scheduling.jobs import NO_REQUEST_LIMIT_S, SimJob

_HEADER = {key: re.compile(rf"^\s*;\s*{key}\s*:\s*(\d+)", re.MULTILINE | re.IGNORECASE)
           for key in ("MaxProcs", "MaxNodes")}


def machine_size(text: str) -> int | None:
    """Processors of the machine from an SWF header (``; MaxProcs:``, else ``; MaxNodes:``)."""
    for key in ("MaxProcs", "MaxNodes"):
        match = _HEADER[key].search(text)
        if match and int(match.group(1)) > 0:
            return int(match.group(1))
    return None


@dataclass(frozen=True)
class Workload:
    """The replayable jobs (``records[i]`` is the trace record of ``jobs[i]``) and how many
    trace jobs were dropped, per reason."""

    jobs: list[SimJob]
    records: list[JobRecord]
    dropped: Counter
    procs: int


def sim_jobs(records: Iterable[JobRecord], procs: int) -> Workload:
    """The replayable jobs in submission order with their requests as limits; jobs with an
    unknown runtime or size, or larger than the machine, are dropped and counted."""
    dropped: Counter = Counter()
    usable = []
    for record in records:
        if record.runtime_s < 0 or record.submit_time < 0:
            dropped["unknown_runtime"] += 1
        elif record.procs <= 0:
            dropped["unknown_size"] += 1
        elif record.procs > procs:
            dropped["larger_than_machine"] += 1
        else:
            usable.append(record)
    usable.sort(key=lambda r: r.submit_time)   # stable: trace order among equal submits
    jobs = []
    for seq, record in enumerate(usable):
        request = record.requested_time_s if record.requested_time_s > 0 else 0.0
        work = min(record.runtime_s, request) if request > 0 else record.runtime_s
        jobs.append(SimJob(seq, record.job_id, record.submit_time, record.procs, work, request,
                           request if request > 0 else NO_REQUEST_LIMIT_S))
    return Workload(jobs, usable, dropped, procs)


def trace_machine_size(path) -> int | None:
    """:func:`machine_size` of a trace file, reading only its leading ``;`` header lines."""
    header = []
    with open(path, "r", encoding="utf-8", errors="replace") as stream:
        for line in stream:
            if line.strip() and not line.lstrip().startswith(";"):
                break
            header.append(line)
    return machine_size("".join(header))
