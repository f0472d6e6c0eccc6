"""Run tables from the store: an application's completed jobs, with what they reported, as rows.

A job's history row keeps its inputs (from the script and the request) and the runtime
features it reported while running (relayed by the Slurm epilog: each value under its key,
and when it was reported under ``<key>@t``). :func:`runs_csv` writes the completed jobs of one
application as the run table :func:`hpcpredict.daemon.lab.runtime.dataset.parse_runs_csv` reads
(``hpcpredict train-runtime --from-store``): one column per input, ``<key>@t`` report times,
the target ``runtime_s``, and as annotations the job id ``_job_id`` and its user ``_user`` (the
user Slurm ran the job as: training keeps each user's runs apart, :mod:`.agreement`). A job that
did not report a value leaves its cell empty.

>>> from hpcpredict.daemon.records import JobRecord
>>> jobs = [JobRecord("1", "ann", 0, runtime_s=120.0, application="cg", state="COMPLETED",
...                   inputs={"n": 400.0, "n@t": 2.5, "solver": "cg"}),
...         JobRecord("2", "ann", 0, runtime_s=60.0, application="cg", state="TIMEOUT", inputs={"n": 900.0})]
>>> text, count = runs_csv(jobs, "cg")
>>> count, text.splitlines()
(1, ['n,solver,n@t,runtime_s,_job_id,_user', '400.0,cg,2.5,120.0,1,ann'])
"""
from __future__ import annotations

import csv
import io
from collections import deque
from typing import Iterable

from ...records import COMPLETED, JobRecord
from .dataset import MAX_ROWS, RESERVED, USER_COLUMN

TARGET = "runtime_s"
REPORT_TIME_SUFFIX = "@t"


def _cell(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def runs_csv(records: Iterable[JobRecord], application: str, *, cluster: str | None = None) -> tuple[str, int]:
    """The run-table CSV of ``application``'s COMPLETED jobs (of ``cluster`` when given) and
    the number of rows (at most the run tables' ``MAX_ROWS``; the latest jobs are kept)."""
    rows: deque[tuple[str, str, float, dict]] = deque(maxlen=MAX_ROWS)   # memory bounded by the table's limit
    for record in records:
        if record.application != application or record.state != COMPLETED or record.runtime_s <= 0:
            continue
        if cluster is not None and record.cluster != cluster:
            continue
        rows.append((record.job_id, record.user, float(record.runtime_s), record.inputs or {}))
    names = {key for _, _, _, inputs in rows for key in inputs}
    usable = [key for key in sorted(names) if key not in RESERVED and key != TARGET and not key.startswith("_")
              and "," not in key]
    inputs = [key for key in usable if not key.endswith(REPORT_TIME_SUFFIX)]
    times = [key for key in usable if key.endswith(REPORT_TIME_SUFFIX) and key[:-2] in inputs]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*inputs, *times, TARGET, "_job_id", USER_COLUMN])
    for job_id, user, runtime_s, values in rows:
        writer.writerow([*(_cell(values[key]) if key in values else "" for key in inputs + times),
                         _cell(runtime_s), job_id, user])
    return out.getvalue(), len(rows)
