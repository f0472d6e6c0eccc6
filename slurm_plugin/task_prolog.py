#!/usr/bin/python3 -sE
"""TaskProlog (batch step): print the walltime suggestion into the job's own output.

Runs as the job user before the batch script. PrologSlurmctld stored the allocation-time
suggestion in the job's AdminComment; this reads it back with ``scontrol show job`` and
prints it with TaskProlog's ``print`` protocol, so the lines land in the job's output file.
Prints nothing when there is no suggestion; never fails the job.
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
    for line in slurmjob.advice_from_admin_comment(slurmjob.parse_scontrol_job(text).get("AdminComment", "")):
        sys.stdout.write(f"print [hpcpredict] {line}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
