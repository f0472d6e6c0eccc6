#!/bin/sh
# TaskProlog: runs as the job user before EVERY task; only the batch step (no SLURM_STEP_ID)
# gets the suggestion, so srun tasks skip the Python start-up entirely.
[ -n "$SLURM_STEP_ID" ] && exit 0
exec /usr/bin/python3 -sE "$(dirname "$0")/task_prolog.py"
