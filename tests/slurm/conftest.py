"""Fixtures of tests/slurm: a real hpcpredictd and real Slurm clusters of three releases: Debian 12's
22.05.8 (harness.py), 24.11.5 and 26.05.5 in Debian roots (harness_root.py)."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from . import harness_root
from .harness import APP_SCRIPT, CLUSTER, SLURM_DIR, Cluster, Daemon, cluster_env, write_hooks_conf


def _daemon(tmp_path_factory, name: str):
    data_dir = tmp_path_factory.mktemp(name)
    data_dir.chmod(0o755)
    server = Daemon(data_dir)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def daemon(tmp_path_factory):
    yield from _daemon(tmp_path_factory, "hpcpredictd")


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


# A site's past: enough batches for a bound at 3 % risk (>= 2 / risk - 1 shortened), and margin
# for the adaptive risk to tighten when jobs outlive their bounds (with 80, the four backfill
# jobs of test_backfill_policy, had they outlived theirs, left no bound below any request).
CALIBRATION_RUNS = 200


@pytest.fixture(scope="session")
def walltime_model(daemon):
    return _train_walltime_model(daemon)


def _train_walltime_model(daemon):
    """The daemon serving a walltime model trained as a site trains it (`hpcpredict train`, which
    reloads the daemon), on a past of CALIBRATION_RUNS jobs of one user (50-150 s each at
    --time=10, submitted 20 min apart: each its own batch). Bound mode sets a kill limit only
    from its calibrated bound: the jobs of the tests' users, whose earlier runs are reported
    after, are then known to it (it learns every outcome the daemon observes that ended after
    its training: the served model skips earlier ones, which it holds already)."""
    now = int(time.time())
    for index in range(CALIBRATION_RUNS):
        runtime = 100.0 * (1 + 0.5 * ((index * 37) % 11 - 5) / 5)       # 50-150 s, spread evenly
        start = now - 5 * 86400 + index * 1200
        request = {"job": {"user": "calib", "job_name": "calibration", "account": "research", "partition": "debug"},
                   "resources": {"nodes": 1}, "time_limit_s": 600}
        ack = daemon.call("ReportOutcome", {"job_id": f"calibration-{index}", "state": "COMPLETED",
                                            "submit_time": start - 60, "start_time": start,
                                            "end_time": start + int(runtime), "elapsed_s": runtime,
                                            "request": request})
        assert ack["stored"] is True
    trained = daemon.cli("train", "--json")
    assert trained.returncode == 0, trained.stderr
    model = json.loads(trained.stdout)
    assert model["kind"] == "walltime" and model["jobs"] >= CALIBRATION_RUNS, model
    return model


def _root_fixtures(release: harness_root.Release):
    """A release's session fixtures: ``daemon_TAG``, its own hpcpredictd (job ids of the
    clusters would collide), and ``cluster_TAG``, its cluster (see _root_cluster)."""
    @pytest.fixture(scope="session", name=f"daemon_{release.tag}")
    def release_daemon(tmp_path_factory):
        yield from _daemon(tmp_path_factory, f"hpcpredictd-{release.tag}")

    @pytest.fixture(scope="session", name=f"cluster_{release.tag}")
    def release_cluster(request, tmp_path_factory):
        yield from _root_cluster(release, request.getfixturevalue(f"daemon_{release.tag}"), tmp_path_factory)
    return release_daemon, release_cluster


daemon_2411, cluster_2411 = _root_fixtures(harness_root.SLURM_2411)   # Slurm 24.11.5
daemon_2605, cluster_2605 = _root_fixtures(harness_root.SLURM_2605)   # Slurm 26.05.5


@pytest.fixture(params=sorted(harness_root.RELEASES))
def root_cluster(request):
    """Each release's cluster in turn (cluster_2411, cluster_2605): a test taking it runs on both
    planning rules of a running soft job (its hard end; from 25.05.4 its soft end, then halfway)."""
    return request.getfixturevalue(f"cluster_{harness_root.RELEASES[request.param].tag}")


def _root_cluster(release: harness_root.Release, daemon: Daemon, tmp_path_factory):
    """A real Slurm cluster of ``release`` (4 nodes x 4 CPUs, whole-node jobs, no slurmdbd) with
    the project's hooks against ``daemon``; starts with SchedulerParameters=time_min_as_soft_limit,
    bf_interval=2,bf_resolution=10 (set_scheduler_parameters() restarts slurmctld with or without
    the option). On Debian 12 the first run builds the release's Debian root (about a minute or
    two: debootstrap and apt-get from the Debian mirror)."""
    if os.geteuid() != 0:
        pytest.fail("tests/slurm need root: they run slurmctld/slurmd and submit as other users")
    if release.root:
        assert shutil.which("debootstrap") or Path("/usr/sbin/debootstrap").exists(), \
            "debootstrap missing: install contrib/apt-packages.txt"
    lock = open(release.lock, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    staging = tmp_path_factory.mktemp(f"hooks-{release.tag}")
    inner = release.slurm_dir
    hooks_conf = {"hook_socket": harness_root.hook_socket_for(release, daemon),
                  "slurm_conf": f"{inner}/etc/slurm.conf", "log_file": f"{inner}/log/hpcpredict-hooks.log",
                  "outcome_wait_s": "0", "budget_s": "0.3"}     # outcome_wait_s 0: no slurmdbd
    write_hooks_conf(staging / "hpcpredict-hooks.conf", hooks_conf)
    env = harness_root.script_env(release, daemon, staging / "hpcpredict-hooks.conf")
    harness_root.run_script("stop", env, timeout=120)
    # building the root (debootstrap + apt-get from the Debian mirror) happens here, once
    started = harness_root.run_script("start", env, timeout=1200)
    try:
        assert started.returncode == 0, (f"the Slurm {release.series} cluster did not start "
                                         f"(SERIES={release.series} tests/slurm/cluster/slurm-in-root.sh start):\n"
                                         + started.stdout[-3000:] + started.stderr[-3000:])
        running = harness_root.RootCluster(release, daemon, hooks_conf, env["SCHED_PARAMS"])
        running.write_script("hello.sh", APP_SCRIPT)
        yield running
    finally:
        harness_root.run_script("stop", env, timeout=120)
        lock.close()
