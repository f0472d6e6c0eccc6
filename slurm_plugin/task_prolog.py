#!/usr/bin/python3 -sE
"""TaskProlog (batch step): print the walltime suggestion into the job's own output.

Runs as the job user before the batch script. PrologSlurmctld stored the allocation-time
suggestion in the job's AdminComment; this reads it back with ``scontrol show job`` and
prints it with TaskProlog's ``print`` protocol, so the lines land in the job's output file.
Prints nothing when there is no suggestion or its runtime is not sane (the prolog writes none
then; this checks again, since anyone with admin rights can write AdminComment); never fails
the job.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import hookclient  # noqa: E402
import slurmjob  # noqa: E402


def main() -> int:
    settings = hookclient.load_settings()
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if not job_id or os.environ.get("SLURM_STEP_ID") or not hookclient.flag(settings["task_prolog_enabled"]):
        return 0
    try:
        text = hookclient.run_command(["scontrol", "show", "job", job_id], settings, timeout=5).decode("utf-8", "replace")
    except hookclient.HookError:
        return 0
    lines = slurmjob.advice_from_admin_comment(slurmjob.parse_scontrol_job(text).get("AdminComment", ""))
    if not lines or not slurmjob.sane_advice(lines[0], float(settings["max_time_limit_s"])):
        return 0
    for line in lines:
        sys.stdout.write(f"print [hpcpredict] {line}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
