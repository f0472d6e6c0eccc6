"""The live picture of the queue: Slurm's running and pending jobs as a :class:`QueueSnapshot`.

Read by one ``squeue`` of a fixed ``--Format`` (:func:`squeue_argv`) on every release: 22.05.8,
24.11 and 26.05 write these fields alike, times as epoch seconds under ``SLURM_TIME_FORMAT=%s``.
Not ``squeue --json``: 22.05.8's writes every field of every job (4.1 KB a job measured on the
test cluster, against 150 bytes here) and ignores ``--states``, and ``json.loads`` of megabytes
holds the GIL for its whole length, which the hook's Predict, answered on another thread of the
same process, would wait out; these records are parsed one at a time, the GIL handed over between
them. The command runs off the request path (:mod:`.keeper`), bounded by time and output bytes.

Order: the pending jobs as slurmctld's scheduler takes them, priority first (higher first), then
the lower job id (the earlier submission); a held job (priority 0) never starts and is left out,
as are suspended jobs. Each job's belief of its runtime is looked up by the caller
(:class:`~.keeper.ForecastKeeper`): the stored hpcpredict estimate its AdminComment names, else
the walltime model's answer now.

>>> text = ("2|PENDING|bob|debug|2|5:00|2:00|1796206972|1796207572|4294901758|\\n"
...         "1|RUNNING|alice|debug|32|10:00|0:00|1796206969|1796206972|4294901759|{hpcpredict=ab12}\\n")
>>> [(j.job_id, j.state, j.cpus, j.time_limit_s, j.time_min_s, j.prediction_id) for j in parse_squeue(text)]
[('2', 'PENDING', 2, 300.0, 120.0, ''), ('1', 'RUNNING', 32, 600.0, None, 'ab12')]
>>> parse_squeue("squeue: error: Invalid user: x\\n")
Traceback (most recent call last):
...
hpcpredict.daemon.forecast.queue.QueueError: squeue output line 1 is not a job record (JobID|State|...): 'squeue: error: Invalid user: x'
"""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import Callable

from ..errors import HpcPredictError
from ...slurm_plugin.slurmjob import linked_prediction_id, slurm_duration_s
from .types import QueuedJob, QueueSnapshot, RuntimeBelief

#: squeue --Format fields (22.05 names, the same on 24.11 and 26.05), each ":0" (never cut) and
#: "|"-terminated; none holds text a user wrote. AdminComment (written by the hooks and admins
#: only, it may hold "|" and newlines) comes last: whatever follows the last "|" is it.
FIELDS = ("JobArrayID", "State", "UserName", "Partition", "NumCPUs", "TimeLimit", "MinTime", "SubmitTime", "StartTime",
          "PriorityLong")
FORMAT = ",".join(f"{field}:0|" for field in FIELDS) + ",admin_comment:0"
STATES = "PENDING,RUNNING,CONFIGURING,COMPLETING"   # COMPLETING still holds its CPUs
RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING"})
ENVIRONMENT = {"SLURM_TIME_FORMAT": "%s"}           # times as epoch seconds
#: Where a record starts: its JobArrayID (an array task's "123_4"; JobID would print "123" for each) and State
_RECORD = re.compile(r"^(\d{1,12}(?:_\d{1,10})?)\|([A-Z_]{1,32})\|", re.M)
_UNLIMITED = frozenset({"UNLIMITED", "INFINITE"})
_NO_TIME = frozenset({"", "N/A", "NONE", "UNKNOWN", "0"})


class QueueError(HpcPredictError):
    """squeue's output is not what the format asked for (a site's wrapper, another tool)."""


@dataclass(frozen=True)
class SlurmJob:
    """One record of :data:`FORMAT` as Slurm wrote it."""

    job_id: str
    state: str
    user: str
    partition: str
    cpus: int
    time_limit_s: float                # math.inf: unlimited
    time_min_s: float | None
    submit_s: float
    start_s: float | None              # running: when it started; pending: Slurm's own planned start
    priority: int
    prediction_id: str                 # the hooks' prediction of it ("" = none: before hpcpredict)

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES


def squeue_argv(command: str) -> list[str]:
    """The configured ``[forecast] squeue_command`` (``squeue``, ``squeue -M cluster``) with the
    options of the picture: every array task on its own line, our states, our format."""
    return [*shlex.split(command), "--noheader", "--array", f"--states={STATES}", f"--Format={FORMAT}"]


def parse_squeue(text: str) -> list[SlurmJob]:
    """The records of :func:`squeue_argv`'s output (bounded by the caller); QueueError naming the
    line or the job and field when the output is not that."""
    starts = [(match.start(), match) for match in _RECORD.finditer(text)]
    if not starts or starts[0][0] != 0:
        first = text.lstrip("\n").splitlines()[0] if text.strip() else ""
        if not first:
            return []
        raise QueueError(f"squeue output line 1 is not a job record (JobID|State|...): {first[:120]!r}")
    jobs = []
    for index, (start, _) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(text)
        record = text[start:end]
        try:
            jobs.append(_job(record[:-1] if record.endswith("\n") else record))
        except _BadRecord as error:    # the line is counted only for the message
            raise QueueError(f"squeue output line {text.count(chr(10), 0, start) + 1}{error}") from None
    return jobs


class _BadRecord(ValueError):
    pass


def _job(record: str) -> SlurmJob:
    parts = record.split("|", len(FIELDS))
    if len(parts) != len(FIELDS) + 1 or "\n" in "|".join(parts[:-1]):
        raise _BadRecord(f": {len(parts)} fields where {FIELDS[0]}|...|AdminComment has {len(FIELDS) + 1}: "
                         f"{record[:120]!r}")
    job_id, state, user, partition, cpus, limit, minimum, submit, start, priority, comment = parts
    where = f" (job {job_id})"
    if not (cpus.isdigit() and priority.isdigit()):
        raise _BadRecord(f"{where}: NumCPUs {cpus!r} and PriorityLong {priority!r} must be whole numbers")
    return SlurmJob(job_id=job_id, state=state, user=user, partition=partition, cpus=int(cpus),
                    time_limit_s=_limit(limit, where), time_min_s=_duration(minimum, "MinTime", where) or None,
                    submit_s=_epoch(submit, "SubmitTime", where) or 0.0, start_s=_epoch(start, "StartTime", where),
                    priority=int(priority), prediction_id=linked_prediction_id(comment))


def _limit(text: str, where: str) -> float:
    if text.strip().upper() in _UNLIMITED:
        return math.inf
    return _duration(text, "TimeLimit", where) or math.inf


def _duration(text: str, field: str, where: str) -> float:
    try:
        return float(slurm_duration_s(text))
    except ValueError:
        raise _BadRecord(f"{where}: {field} {text!r} is not a Slurm duration") from None


def _epoch(text: str, field: str, where: str) -> float | None:
    text = text.strip()
    if text.upper() in _NO_TIME:
        return None
    if not text.isdigit():
        raise _BadRecord(f"{where}: {field} {text!r} is not epoch seconds (is SLURM_TIME_FORMAT=%s honoured?)")
    return float(text)


def snapshot_of(jobs: list[SlurmJob], *, taken_s: float, total_cpus: int, planning_rule: str, max_jobs: int,
                belief_of: Callable[[SlurmJob], RuntimeBelief | None]) -> tuple[QueueSnapshot, int]:
    """The snapshot of ``jobs``: every running job, then the pending ones in priority order up to
    ``max_jobs`` in all (the later ones cannot delay the earlier: backfill only starts a job where
    it delays no reservation); also how many pending jobs were left out that way. QueueError when
    the running jobs alone are more than ``max_jobs``."""
    running = [job for job in jobs if job.running]
    if len(running) > max_jobs:
        raise QueueError(f"{len(running)} running jobs: more than [forecast] max_jobs = {max_jobs}")
    pending = sorted((job for job in jobs if job.state == "PENDING" and job.priority > 0),
                     key=lambda job: (-job.priority, _id_key(job.job_id)))
    kept = pending[:max_jobs - len(running)]
    queued = [_queued(job, 0, belief_of(job), taken_s) for job in running]
    queued += [_queued(job, rank, belief_of(job), taken_s) for rank, job in enumerate(kept)]
    return (QueueSnapshot(taken_s=taken_s, total_cpus=total_cpus, planning_rule=planning_rule, jobs=tuple(queued)),
            len(pending) - len(kept))


def _id_key(job_id: str) -> tuple[int, int]:
    head, _, task = job_id.partition("_")
    return int(head), int(task or 0)


def _queued(job: SlurmJob, rank: int, belief: RuntimeBelief | None, taken_s: float) -> QueuedJob:
    return QueuedJob(job_id=job.job_id, user=job.user, partition=job.partition, cpus=job.cpus,
                     time_limit_s=job.time_limit_s, time_min_s=job.time_min_s, submit_s=job.submit_s,
                     start_s=(job.start_s or taken_s) if job.running else None, priority_rank=rank, belief=belief)
