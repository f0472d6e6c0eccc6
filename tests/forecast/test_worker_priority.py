"""The forecast's process takes only CPU nothing else wants (SCHED_IDLE), run as the daemon runs it:
an unprivileged user (the daemon is one) in a child process."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

CODE = ("import os; from hpcpredict.daemon.forecast.worker import lower_priority; "
        "got = lower_priority(); print(got, os.sched_getscheduler(0) == os.SCHED_IDLE, os.nice(0))")


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to the nobody user (needs root)")
def test_the_worker_runs_in_the_idle_class_as_an_ordinary_user():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60, user="nobody",
                          env={**os.environ, "HOME": "/tmp"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["idle", "True", "10"]
