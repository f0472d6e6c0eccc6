#!/usr/bin/python3 -sE
"""TaskProlog (batch step): runtime-features file for the job, walltime suggestion in its output.

Runs as the job user before the batch script, and reads the job with ``slurmjob.read_job``.

* Runtime features: creates the job's features file (``features_file.features_path``: the
  job's working directory, or ``features_dir``) and exports ``HPCPREDICT_FEATURES_FILE`` (its
  name) and ``HPCPREDICT_T0`` (now, Unix seconds) with TaskProlog's ``export`` protocol, so the
  job, and the srun steps it starts, can append ``HPCPREDICT t=... key=value`` lines that
  EpilogSlurmctld relays to the daemon. When something else already sits under that name (a
  link, another user's file) the file gets a name nobody can take in advance (``features_file.create``).
* Suggestion: PrologSlurmctld stored the allocation-time suggestion in the job's AdminComment;
  this prints it with TaskProlog's ``print`` protocol, so the lines land in the job's output
  file. Prints nothing when there is no suggestion or its runtime is not sane (the prolog
  writes none then; this checks again, since anyone with admin rights can write AdminComment).

Never fails the job.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import hookclient  # noqa: E402
import slurmjob  # noqa: E402

try:   # a hooks directory installed before features_file.py existed: no runtime features, the rest works
    import features_file  # noqa: E402
except ImportError:
    features_file = None

# SLURM_STEP_ID of the batch step: unset up to 24.11, SLURM_BATCH_SCRIPT printed signed (-5) on 26.05.5
BATCH_STEP_IDS = ("", "-5", "4294967291")


def export_features_file(settings: dict, job) -> None:
    if features_file is None or not hookclient.flag(settings["features_enabled"]):
        return
    path = features_file.features_path(settings, job.job_id, job.work_dir)
    path = features_file.create(path) if path else ""   # its squat-proof name when another user took it
    if path:
        sys.stdout.write(f"export {features_file.FEATURES_FILE_ENV}={path}\n")
        sys.stdout.write(f"export {features_file.START_TIME_ENV}={int(time.time())}\n")


def main() -> int:
    settings = hookclient.load_settings()
    job_id = os.environ.get("SLURM_JOB_ID", "")
    suggest = hookclient.flag(settings["task_prolog_enabled"])
    if not job_id or os.environ.get("SLURM_STEP_ID", "") not in BATCH_STEP_IDS or not (suggest or hookclient.flag(settings["features_enabled"])):
        return 0
    features = hookclient.flag(settings["features_enabled"]) and features_file is not None
    try:
        job = slurmjob.read_job(hookclient.slurm_runner(settings, timeout=5), job_id,
                                work_dir=features and not settings.get("features_dir"))
    except (hookclient.HookError, ValueError):
        return 0
    try:
        export_features_file(settings, job)
    except Exception:  # noqa: BLE001 - a features problem must never stop the job or its suggestion
        pass
    if not suggest:
        return 0
    lines = slurmjob.advice_from_admin_comment(job.admin_comment)
    if not lines or not slurmjob.sane_advice(slurmjob.our_field(job.admin_comment), float(settings["max_time_limit_s"])):
        return 0
    for line in lines:
        sys.stdout.write(f"print [hpcpredict] {line}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
