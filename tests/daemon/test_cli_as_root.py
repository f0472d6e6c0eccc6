"""Root running a command that writes the daemon's store or models (the nightly refresh of a
root cron line, an admin's `hpcpredict train`) on a data_dir the daemon's user owns: the
command continues as that user, so the daemon can read and write everything it created.

Real CLI processes, a real data_dir owned by an unprivileged user (``nobody`` stands in for
the daemon's user), a real trace."""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "hpc2n-subset.swf"


@pytest.fixture
def owned_data_dir():
    if os.geteuid() != 0:
        pytest.skip("needs root: the behaviour under test is root's")
    top = Path(tempfile.mkdtemp(prefix="hpd-owner-", dir="/tmp"))
    top.chmod(0o755)
    data = top / "data"
    data.mkdir(mode=0o750)
    nobody = pwd.getpwnam("nobody")
    os.chown(data, nobody.pw_uid, nobody.pw_gid)
    yield data, nobody
    shutil.rmtree(top, ignore_errors=True)


def test_root_ingest_and_train_write_as_the_data_dir_owner(owned_data_dir):
    data, nobody = owned_data_dir
    cli = os.path.join(os.path.dirname(sys.executable), "hpcpredict")
    env = dict(os.environ, HPCPREDICT_DATA_DIR=str(data), HPCPREDICT_CONFIG_PATH="")
    for command in (["ingest", str(TRACE), "--no-reload"], ["train", "--no-reload"]):
        done = subprocess.run([cli, *command], env=env, capture_output=True, text=True, timeout=300, cwd="/")
        assert done.returncode == 0, done.stderr
        assert f"note: running as nobody, the owner of {data}" in done.stderr
    created = [path for path in data.rglob("*")]
    assert any(path.name == "CURRENT" for path in created) and any(path.suffix == ".sqlite" for path in created)
    not_owned = [str(path) for path in created if path.lstat().st_uid != nobody.pw_uid]
    assert not not_owned, not_owned
