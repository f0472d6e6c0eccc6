#!/bin/sh
# install-hooks.sh [SLURM_ETC] - copy hpcpredict's Slurm hooks from the installed package.
#   job_submit.lua            -> $SLURM_ETC/job_submit.lua   (must sit next to slurm.conf)
#   prolog/epilog/task scripts, their client and settings -> $SLURM_ETC/hpcpredict/
# Run as root on the controller (and the TaskProlog files on every compute node).
# Existing files are kept as *.orig once; hpcpredict-hooks.conf is never overwritten.
set -eu
ETC="${1:-/etc/slurm}"
PYTHON="${PYTHON:-/opt/hpcpredict/venv/bin/python}"
SRC="$("$PYTHON" -c 'import os, hpcpredict.slurm_plugin as p; print(os.path.dirname(p.__file__))')"
HERE="$(cd "$(dirname "$0")" && pwd)"
install -d -m 755 "$ETC/hpcpredict"
for f in job_submit.lua; do
  [ -e "$ETC/$f" ] && [ ! -e "$ETC/$f.orig" ] && cp -p "$ETC/$f" "$ETC/$f.orig"
  install -m 644 "$SRC/$f" "$ETC/$f"
done
for f in hookclient.py slurmjob.py features_file.py task_prolog.py task_epilog.py; do install -m 644 "$SRC/$f" "$ETC/hpcpredict/$f"; done
for f in prolog_slurmctld.py epilog_slurmctld.py task_prolog.sh task_epilog.sh; do install -m 755 "$SRC/$f" "$ETC/hpcpredict/$f"; done
[ -e "$ETC/hpcpredict/hpcpredict-hooks.conf" ] || install -m 644 "$HERE/hpcpredict-hooks.conf.example" "$ETC/hpcpredict/hpcpredict-hooks.conf"
echo "installed into $ETC and $ETC/hpcpredict; now add contrib/slurm/slurm.conf.snippet to slurm.conf"
echo "and restart slurmctld (PrologSlurmctld/EpilogSlurmctld are read at start-up)."
