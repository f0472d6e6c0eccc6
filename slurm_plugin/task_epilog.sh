#!/bin/sh
# TaskEpilog: runs as the job user after EVERY task; only the batch step made a features file
# (TaskProlog), so srun tasks skip the Python start-up entirely. Batch step ids as in task_prolog.sh.
case "${SLURM_STEP_ID:-}" in ""|-5|4294967291) ;; *) exit 0 ;; esac
exec /usr/bin/python3 -sE "$(dirname "$0")/task_epilog.py"
