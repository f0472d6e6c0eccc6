"""The off switch: `enabled = false` in hpcpredict-hooks.conf makes PrologSlurmctld do nothing
(no scontrol, no daemon call, no AdminComment change), as job_submit.lua does. The real script
runs as slurmctld runs it; `scontrol` is a stand-in that records that it was called."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from .harness import PLUGIN


@pytest.mark.parametrize("enabled, calls_scontrol", [("false", False), ("true", True)])
def test_prolog_does_nothing_when_switched_off(tmp_path, enabled, calls_scontrol):
    hooks = tmp_path / "hpcpredict"
    shutil.copytree(PLUGIN, hooks, ignore=shutil.ignore_patterns("__pycache__"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "scontrol-called"
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\necho \"$@\" >> {called}\nexit 1\n")
    (bin_dir / "scontrol").chmod(0o755)
    (hooks / "hpcpredict-hooks.conf").write_text(
        f"enabled = {enabled}\nslurm_bin = {bin_dir}\nhook_socket = {tmp_path}/none.sock\n"
        f"log_file = {tmp_path}/hooks.log\n")
    done = subprocess.run([sys.executable, str(hooks / "prolog_slurmctld.py")], capture_output=True, timeout=30,
                          env={"PATH": os.environ["PATH"], "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1"})
    assert done.returncode == 0, done.stderr
    assert called.exists() == calls_scontrol
