#!/usr/bin/python3 -sE
"""TaskEpilog (batch step): remove the job's runtime-features file when the job wrote nothing.

Runs as the job user after the batch script, on the batch host. The TaskProlog made the file
in the job's working directory (or ``features_dir``); most jobs never report a feature, and
SlurmUser (EpilogSlurmctld) may not remove a file from a user's own directory, so without this
every job would leave an empty ``.hpcpredict-features-<job id>`` behind. A file the job wrote
into is left for EpilogSlurmctld, which reads it (and removes it where it may). The epilog's
environment is the step's, not the one TaskProlog exported into the task, so the name is
worked out again as the TaskProlog did (``features_file.features_path``), from the directory
slurmstepd runs the epilog in: the job's working directory (no call to slurmctld at every job's end).

Never fails the job (exit 0 whatever happens).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import hookclient  # noqa: E402

try:   # a hooks directory installed before features_file.py existed: nothing was made
    import features_file  # noqa: E402
except ImportError:
    features_file = None

BATCH_STEP_IDS = ("", "-5", "4294967291")   # as task_prolog.py


def main() -> int:
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if features_file is None or not job_id or os.environ.get("SLURM_STEP_ID", "") not in BATCH_STEP_IDS:
        return 0
    settings = hookclient.load_settings()
    if not hookclient.flag(settings["features_enabled"]):
        return 0
    path = features_file.features_path(settings, job_id, os.getcwd())
    if path:
        features_file.discard_unused(path, os.getuid())
    return 0


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001 - a cleanup problem must never touch the job
        pass
    sys.exit(0)
