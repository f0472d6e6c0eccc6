"""Files private by default and publishing that cannot be redirected or left unreadable.

Real files, real modes, real users: the store and its journals are created under umask 000
in a child process; publishing is attacked with symlinks and a CURRENT naming a path outside
the registry; readability is checked by reading as ``nobody`` (a real setuid child), and the
daemon runs as ``nobody`` for the train/publish exit status.
"""
from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.registry import ModelRegistry
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.daemon.daemonproc import DaemonProcess
from tests.robustness.conftest import Client, job, world_dir  # noqa: F401  (fixture)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changes owners and runs children as other users")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _placement_folder(path: Path) -> Path:
    """A small valid `topology` model (the kind with the simplest loader)."""
    from hpcpredict.topology.placement import Placement

    path.mkdir(parents=True)
    Placement(kind="tree", levels=("leaf", "spine"),
              paths={f"n{i:03d}": (f"leaf{i // 8}", "spine0") for i in range(32)}).save(path / "topology.json")
    return path


def test_store_and_journals_are_private_under_umask_000(tmp_path):
    code = ("import os; os.umask(0)\n"
            "from hpcpredict.daemon.store import SQLiteStore\n"
            f"s = SQLiteStore({str(tmp_path / 'h.sqlite')!r}, journal_bytes=1 << 16)\n"
            "s._write_one('CREATE TABLE IF NOT EXISTS t (x)', ()); s.close()\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    made = sorted(p.name for p in tmp_path.iterdir())
    assert {"h.sqlite", "h.sqlite.journal-0", "h.sqlite.journal-1"} <= set(made)
    for name in made:
        assert _mode(tmp_path / name) == 0o600, f"{name}: {_mode(tmp_path / name):04o}"


def test_an_existing_world_readable_store_is_made_private(tmp_path):
    from hpcpredict.daemon.store import SQLiteStore

    path = tmp_path / "old.sqlite"
    SQLiteStore(str(path)).close()
    os.chmod(path, 0o644)
    SQLiteStore(str(path)).close()
    assert _mode(path) == 0o600


def test_the_running_daemon_keeps_its_files_private(world_dir):
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_HOOK_SOCKET": ""})
    daemon.env = dict(daemon.env)
    old = os.umask(0)
    try:
        daemon.start()
    finally:
        os.umask(old)
    client = Client(daemon)
    try:
        client.stub.Predict(job(), timeout=30)
        client.admin.GetStatus(pb.StatusRequest(), timeout=10)
        for path in world_dir.glob("hpcpredict.sqlite*"):
            assert _mode(path) & 0o077 == 0, f"{path.name}: {_mode(path):04o}"
    finally:
        client.close()
        daemon.stop()


def test_published_files_have_fixed_modes_under_umask_000(tmp_path):
    source = _placement_folder(tmp_path / "src")
    os.chmod(source / "topology.json", 0o600)
    old = os.umask(0)
    try:
        artifact = ModelRegistry(tmp_path / "models").publish("topology", source)
    finally:
        os.umask(old)
    for path in [artifact.path, *artifact.path.rglob("*"), artifact.path.parent / "CURRENT"]:
        assert _mode(path) == (0o750 if path.is_dir() else 0o640), f"{path}: {_mode(path):04o}"


@pytest.mark.parametrize("where", ["file", "folder", "top"])
def test_publish_refuses_symlinks(tmp_path, where):
    source = _placement_folder(tmp_path / "src")
    secret = tmp_path / "secret"
    secret.write_text("root's secret\n")
    if where == "file":
        (source / "extra.json").symlink_to(secret)
    elif where == "folder":
        (source / "sub").symlink_to(tmp_path, target_is_directory=True)
    else:
        (tmp_path / "link").symlink_to(source, target_is_directory=True)
        source = tmp_path / "link"
    registry = ModelRegistry(tmp_path / "models")
    with pytest.raises(ModelArtifactError, match="symlink"):
        registry.publish("topology", source)
    assert not list((tmp_path / "models").rglob("CURRENT"))
    assert not any("secret" in p.read_text(errors="ignore") for p in (tmp_path / "models").rglob("*") if p.is_file())


@pytest.mark.parametrize("pointer", ["../../../../etc", "/etc", ".tmp-x", "v/../../other"])
def test_current_cannot_point_outside_its_model(tmp_path, pointer):
    registry = ModelRegistry(tmp_path / "models")
    artifact = registry.publish("topology", _placement_folder(tmp_path / "src"))
    (artifact.path.parent / "CURRENT").write_text(pointer + "\n")
    with pytest.raises(ModelArtifactError, match="not a version"):
        registry.current("topology")


def test_a_version_folder_swapped_for_a_symlink_is_refused(tmp_path):
    registry = ModelRegistry(tmp_path / "models")
    artifact = registry.publish("topology", _placement_folder(tmp_path / "src"))
    elsewhere = tmp_path / "elsewhere"
    shutil.move(artifact.path, elsewhere)
    artifact.path.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ModelArtifactError, match="not a version"):
        registry.current("topology")


def _read_as(user: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["cat", str(path)], user=user, capture_output=True, text=True)


@needs_root
def test_root_publishes_for_the_daemons_user(world_dir):
    """Root's publish into a models directory owned by the daemon's user: that user reads it."""
    nobody = pwd.getpwnam("nobody")
    models = world_dir / "models"
    models.mkdir()
    os.chown(models, nobody.pw_uid, nobody.pw_gid)
    source = _placement_folder(world_dir / "src")
    os.chmod(source / "topology.json", 0o600)   # as a root-owned temporary folder leaves it
    artifact = ModelRegistry(models).publish("topology", source)
    for path in [*artifact.path.rglob("*"), artifact.path.parent / "CURRENT"]:
        assert os.lstat(path).st_uid == nobody.pw_uid
    assert _read_as("nobody", artifact.model_path / "topology.json").returncode == 0


@needs_root
def test_publish_that_the_daemon_could_not_read_is_refused_before_current_moves(world_dir):
    """A publisher that is neither root nor the daemon's user, in none of its groups."""
    daemon_user = pwd.getpwnam("nobody")   # the publisher is `daemon`, in none of nobody's groups
    models = world_dir / "models"
    models.mkdir(mode=0o777)
    os.chmod(models, 0o777)
    os.chown(models, daemon_user.pw_uid, daemon_user.pw_gid)
    source = _placement_folder(world_dir / "src")
    for path in [source, *source.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    code = ("from hpcpredict.daemon.registry import ModelRegistry\n"
            f"ModelRegistry({str(models)!r}).publish('topology', {str(source)!r})\n")
    done = subprocess.run([sys.executable, "-c", code], user="daemon", capture_output=True, text=True,
                          env={**os.environ, "HOME": "/tmp"})
    assert done.returncode != 0
    assert "the daemon's user nobody could not read" in done.stderr, done.stderr[-2000:]
    assert not list(models.rglob("CURRENT")) and not list(models.rglob("artifact.json"))


@needs_root
@pytest.mark.parametrize("owner,expected", [("", 0), ("daemon:daemon", 1)], ids=["daemon-user", "wrong-owner"])
def test_publish_exits_non_zero_when_the_daemon_cannot_load_the_model(world_dir, owner, expected):
    """The daemon runs as nobody; root runs ``hpcpredict publish`` (it continues as the data
    directory's owner, nobody). With the files handed to the daemon's user the daemon serves the
    new version (exit 0); with [models] owner naming another user the publish is refused or the
    daemon cannot load it, and the command fails instead of printing "daemon reloaded"."""
    nobody = pwd.getpwnam("nobody")
    os.chown(world_dir, nobody.pw_uid, nobody.pw_gid)
    daemon = DaemonProcess(world_dir, user="nobody").start()
    try:
        source = _placement_folder(world_dir / "src")
        for path in [source, *source.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "publish", "topology", str(source)],
                              env={**os.environ, "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_MODELS_OWNER": owner},
                              capture_output=True, text=True, cwd="/")
        assert done.returncode == expected, done.stdout + done.stderr
    finally:
        daemon.stop()
