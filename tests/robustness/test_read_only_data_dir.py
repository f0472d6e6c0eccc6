"""GetStatus on a read-only data directory: a real read-only bind mount (root only), the
daemon's sockets elsewhere, as in the site layout (/run/hpcpredict). The daemon starts,
answers, and its status names what it cannot do instead of the daemon refusing to start."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from hpcpredict.daemon.store import SQLiteStore


def _mount(*argv: str) -> bool:
    return subprocess.run(["mount", *argv], capture_output=True).returncode == 0


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
    with open(tmp_path / "daemon.log", "wb") as log:
        daemon = subprocess.Popen([sys.executable, "-m", "hpcpredict.daemon.server"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "status", "--json"],
                                  env=env, capture_output=True, text=True)
            if done.returncode == 0 or time.monotonic() > deadline or daemon.poll() is not None:
                break
            time.sleep(0.3)
        assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
        assert done.returncode == 0, done.stdout + done.stderr
        faults = json.dumps(json.loads(done.stdout)).lower()
        assert "read-only file system" in faults and "store" in faults, faults
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
