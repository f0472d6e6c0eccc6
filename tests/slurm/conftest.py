"""Fixtures of tests/slurm: a real hpcpredictd and a real Slurm 22.05 cluster (see harness.py)."""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import APP_SCRIPT, CLUSTER, SLURM_DIR, Cluster, Daemon, cluster_env, write_hooks_conf


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("hpcpredictd")
    data_dir.chmod(0o755)
    server = Daemon(data_dir)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def cluster(daemon, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("tests/slurm need root: they run slurmctld/slurmd and submit as other users")
    for program in ("sbatch", "slurmctld", "munged", "runuser", "lua5.1"):
        assert shutil.which(program) or Path(f"/usr/sbin/{program}").exists(), \
            f"{program} missing: install contrib/apt-packages.txt"
    # One test cluster per machine (fixed directory and ports): a second run waits for the first.
    lock = open("/tmp/hpcpredict-slurm-test.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    staging = tmp_path_factory.mktemp("hooks")
    hooks_conf = {"hook_socket": daemon.hook_socket, "slurm_conf": str(SLURM_DIR / "etc" / "slurm.conf"),
                  "log_file": str(SLURM_DIR / "log" / "hpcpredict-hooks.log"), "outcome_wait_s": "30",
                  "budget_s": "0.3"}
    write_hooks_conf(staging / "hpcpredict-hooks.conf", hooks_conf)
    env = cluster_env(staging)
    subprocess.run([str(CLUSTER / "stop-cluster.sh")], env=env, capture_output=True, timeout=120)
    started = subprocess.run([str(CLUSTER / "start-cluster.sh")], env=env, capture_output=True, text=True,
                             timeout=300)
    try:
        assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
        running = Cluster(daemon, hooks_conf)
        running.write_script("hello.sh", APP_SCRIPT)
        yield running
    finally:
        subprocess.run([str(CLUSTER / "stop-cluster.sh")], env=env, capture_output=True, timeout=120)
        lock.close()
