"""A site admin's first hour, timed: tests/site/test_guide.py follows contrib/slurm/ADMIN.md on
the real Slurm test cluster (SlurmUser=slurm, the daemon as ``hpcpredict`` without systemd, a
job from an ordinary user, refresh as root and as the daemon's user, upgrade, uninstall) and
reports how long each part took; the headline is the machine time from ``git clone`` to the
first suggestion in a job's output (install from a wheel with its dependencies from the
configured package index, daemon start, hooks, first history load, one job).

    sudo .venv/bin/python -m benchmarks run site
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

DESCRIPTION = "Site install following ADMIN.md on the Slurm test cluster: time from clone to the first suggestion"

REPO = Path(__file__).resolve().parents[2]


def run(args: list[str]) -> dict:
    if os.geteuid() != 0:
        raise SystemExit("benchmarks run site: run as root (installs a site, starts Slurm)")
    with tempfile.TemporaryDirectory() as work:
        timings = Path(work) / "timings.json"
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               str(REPO / "tests" / "site" / "test_guide.py")],
                              cwd=REPO, env=dict(os.environ, HPCPREDICT_GUIDE_TIMINGS=str(timings)),
                              capture_output=True, text=True, timeout=3600)
        measured = json.loads(timings.read_text()) if timings.exists() else {}
    seconds = {name: round(value, 1) for name, value in measured.items()}
    return {"headline": {"guide_test_passed": done.returncode == 0,
                         "clone_to_first_suggestion_s": seconds.get("clone_to_first_suggestion_s")},
            "guide_test_passed": done.returncode == 0, "seconds": seconds,
            "pytest_tail": done.stdout.strip().splitlines()[-1:] if done.stdout else []}
