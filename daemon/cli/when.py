"""`hpcpredict when JOBID | JOB_SCRIPT [sbatch options]`: when will a job start (asks the daemon).

``--json`` prints the daemon's StartEstimate, keys (stable; instants are Unix seconds, 0 = none):
``job_id``, ``user``, ``state`` (PENDING | RUNNING | NEW), ``median_start_s``, ``low80_start_s``,
``high80_start_s``, ``slurm_start_s`` (every job at its time limit: Slurm's method),
``squeue_start_s`` (what Slurm's backfill planned, as squeue showed it), ``started_s``,
``snapshot_s``, ``snapshot_age_s``, ``runs``, ``planning_rule``, ``caveats``.
"""
from __future__ import annotations

import re

_JOB_ID = re.compile(r"^\d{1,12}(?:_\d{1,10})?$")


def register(subparsers) -> None:
    from .predict import add_job_arguments

    parser = subparsers.add_parser(
        "when", help="when will a job start (a forecast on hpcpredict's runtime predictions)",
        description="When will JOBID (one of your pending jobs; admins: anyone's) start, or JOB_SCRIPT if "
                    "submitted now with the given sbatch options, e.g. `hpcpredict when 1234` or "
                    "`hpcpredict when job.sh -N 4 -t 2:00:00`. The queue is run forward with every job's "
                    "predicted runtime (the median and an 80 % interval of several runs) beside Slurm's own "
                    "method (every job at its time limit). On a login or compute node it asks the "
                    "controller's daemon at [client] remote, as `predict` does.")
    add_job_arguments(parser, "target", "JOBID|JOB_SCRIPT",
                      sbatch_help="for JOB_SCRIPT: sbatch-style options, e.g. -N 4 -t 2:00:00")
    parser.set_defaults(handler=_when)


def _when(args) -> int:
    import os

    from .common import config_of, message_dict, print_json, print_lines
    from .predict import job_script_request, split_own_options
    from ..client import user_client
    from ..errors import HpcPredictError
    from ...proto.v1 import hpcpredict_pb2 as pb

    sbatch = split_own_options(args)
    if _JOB_ID.match(args.target) and not os.path.exists(args.target):
        if sbatch:
            raise HpcPredictError(f"sbatch options are for a job script, not job {args.target}: {' '.join(sbatch)}")
        request = pb.WhenRequest(job_id=args.target)
    else:
        request = pb.WhenRequest(request=job_script_request(args.target, sbatch, args)[0])
    with user_client(args.socket, config_of(args), timeout=args.timeout) as client:
        estimate = client.call("When", request)
    if args.json:
        print_json(message_dict(estimate))
    else:
        print_lines(when_lines(estimate))
    return 0


def when_lines(estimate, now: float | None = None) -> list[str]:
    """The answer in words, e.g. "Job 12: likely to start in 25 min (80 %: 10-50 min); Slurm's own
    estimate: 3.2 h (from time limits)".

    >>> from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
    >>> when_lines(pb.StartEstimate(job_id="12", state="PENDING", median_start_s=1500, low80_start_s=600,
    ...                             high80_start_s=3000, slurm_start_s=11400, snapshot_s=0, runs=32,
    ...                             caveats="one pool of CPUs"), now=0)[0]
    "Job 12: likely to start in 25.0 min (80 %: 10–50 min); Slurm's own estimate: 3.2 h (from time limits)"
    """
    import time

    from ..timefmt import human, human_range

    now = time.time() if now is None else now
    name = f"Job {estimate.job_id}" if estimate.job_id else "This job, if submitted now,"
    if estimate.state == "RUNNING":
        return [f"{name} is running (started {human(max(0.0, now - estimate.started_s))} ago)."]
    soon = lambda instant: max(0.0, instant - now)   # noqa: E731
    line = (f"{name}: likely to start in {human(soon(estimate.median_start_s))} "
            f"(80 %: {human_range(soon(estimate.low80_start_s), soon(estimate.high80_start_s))})")
    if estimate.slurm_start_s:
        line += f"; Slurm's own estimate: {human(soon(estimate.slurm_start_s))} (from time limits)"
    lines = [line]
    if estimate.squeue_start_s:
        lines.append(f"Slurm's backfill plans it to start in {human(soon(estimate.squeue_start_s))} (squeue --start).")
    lines.append(f"Forecast of the queue as read {human(estimate.snapshot_age_s)} ago, {estimate.runs} runs; "
                 f"it simplifies: {estimate.caveats}.")
    return lines
