"""GetStatus on a read-only data directory: a real read-only bind mount (root only), the
daemon's sockets elsewhere, as in the site layout (/run/hpcpredict). The daemon starts,
answers, and its status names what it cannot do instead of the daemon refusing to start."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hpcpredict.daemon.store import SQLiteStore


def _mount(*argv: str) -> bool:
    return subprocess.run(["mount", *argv], capture_output=True).returncode == 0


def _start_and_ask_status(env: dict, log_path: Path, **popen):
    """Start hpcpredictd and ask ``hpcpredict status --json`` until it answers, the daemon
    exits or 120 s pass (a deadline to give up, generous so that a loaded machine does not fail
    it): (the daemon process, the last status run)."""
    with open(log_path, "wb") as log:
        if "user" in popen:
            popen["group"] = popen["user"]
        daemon = subprocess.Popen([sys.executable, "-m", "hpcpredict.daemon.server"], env=env, stdout=log,
                                  stderr=log, **popen)
    deadline = time.monotonic() + 120
    while True:
        status = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "status", "--json"],
                                env=env, capture_output=True, text=True)
        if status.returncode == 0 or time.monotonic() > deadline or daemon.poll() is not None:
            return daemon, status
        time.sleep(0.3)


@pytest.fixture
def read_only_data_dir(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    SQLiteStore(str(data / "hpcpredict.sqlite")).close()       # a store from an earlier run
    if os.geteuid() != 0 or not _mount("--bind", str(data), str(data)):
        pytest.skip("needs root and bind mounts")
    try:
        if not _mount("-o", "remount,ro,bind", str(data)):
            pytest.skip("cannot remount read-only here")
        yield data
    finally:
        subprocess.run(["umount", str(data)], check=False)


def test_status_works_on_a_read_only_data_directory(read_only_data_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    env = {**os.environ, "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(read_only_data_dir),
           "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_DAEMON_SOCKET": str(run / "grpc.sock"),
           "HPCPREDICT_DAEMON_HOOK_SOCKET": str(run / "local.sock")}
    daemon, done = _start_and_ask_status(env, tmp_path / "daemon.log")
    try:
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        assert done.returncode == 0, done.stdout + done.stderr
        faults = json.dumps(json.loads(done.stdout)).lower()
        assert "read-only file system" in faults and "store" in faults, faults
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


@pytest.fixture
def shared_tmp():
    """A folder nobody can traverse (pytest's own tmp folders are root's, mode 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="hpd-shm-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("left_by_root", ["hpcpredict.sqlite-shm", "hpcpredict.sqlite.journal-0"])
def test_an_unwritable_shm_or_journal_file_is_a_fault_and_predictions_are_still_answered(shared_tmp, left_by_root):
    """SQLite's ``-shm`` or a prediction journal left by root with mode 000 beside the store of
    a daemon running as nobody: a fault (never SIGBUS, never a crash); Predict keeps answering."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another user")
    tmp_path = shared_tmp
    data, run = tmp_path / "data", tmp_path / "run"
    for folder in (data, run):
        folder.mkdir()
        os.chown(folder, 65534, 65534)
    os.chmod(tmp_path, 0o755)
    store = data / "hpcpredict.sqlite"
    SQLiteStore(str(store)).close()
    os.chown(store, 65534, 65534)
    unwritable = data / left_by_root
    unwritable.write_bytes(b"")
    os.chmod(unwritable, 0)
    env = {**os.environ, "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(data), "HOME": str(run),
           "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_DAEMON_SOCKET": str(run / "grpc.sock"),
           "HPCPREDICT_DAEMON_HOOK_SOCKET": str(run / "local.sock")}
    daemon, status = _start_and_ask_status(env, tmp_path / "daemon.log", user=65534, cwd=str(run))
    try:
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        assert status.returncode == 0, status.stdout + status.stderr
        faults = json.loads(status.stdout).get("faults")
        assert faults, status.stdout
        script = tmp_path / "job.sh"
        script.write_text("#!/bin/bash\n#SBATCH -t 1:00:00\nsrun true\n")
        predicted = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "predict", str(script),
                                    "--user", "nobody", "--json"], env=env, capture_output=True, text=True)
        assert predicted.returncode == 0 and json.loads(predicted.stdout)["runtime_s"] > 0, predicted.stderr
        assert daemon.poll() is None
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


def test_a_read_only_data_directory_in_the_default_layout_is_a_clear_error(read_only_data_dir, tmp_path):
    """Both sockets in the data directory (the default layout): nothing can be served, and the
    daemon says so in one line naming both, not with gRPC's RuntimeError traceback."""
    env = {**os.environ, "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(read_only_data_dir),
           "HPCPREDICT_DAEMON_METRICS": ""}
    done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.server"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "RuntimeError" not in done.stderr, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last == (f"hpcpredictd: cannot start: local socket {read_only_data_dir}/hook.sock: Read-only file system; "
                    f"gRPC socket unix:{read_only_data_dir}/hpcpredictd.sock: Read-only file system"), last


def test_a_grpc_socket_in_a_read_only_data_directory_is_a_fault_and_the_local_socket_serves(read_only_data_dir,
                                                                                          tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    env = {**os.environ, "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(read_only_data_dir),
           "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_DAEMON_HOOK_SOCKET": str(run / "local.sock")}
    daemon, done = _start_and_ask_status(env, tmp_path / "daemon.log")
    try:
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        assert done.returncode == 0, done.stdout + done.stderr
        faults = json.loads(done.stdout)["faults"]
        assert f"grpc: listen: unix:{read_only_data_dir}/hpcpredictd.sock: Read-only file system" in faults, faults
    finally:
        daemon.terminate()
        assert daemon.wait(timeout=30) == 0
    assert "Traceback" not in (tmp_path / "daemon.log").read_text()
