import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.daemon.daemonproc import DaemonProcess


@pytest.fixture
def world_dir():
    """A data dir every user can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="hpd-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(world_dir):
    process = DaemonProcess(world_dir).start()
    yield process
    process.stop()
