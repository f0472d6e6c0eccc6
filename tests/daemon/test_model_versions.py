"""Backing out a model: publishing an old version folder again, `hpcpredict rollback`, and the
pruning of old versions (`[models] keep_versions`), through the real CLI on a real models folder."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.registry import CURRENT, ModelRegistry
from hpcpredict.topology.placement import Placement


def hpcpredict(data_dir, *command, keep="10"):
    cli = os.path.join(os.path.dirname(sys.executable), "hpcpredict")
    env = {"PATH": os.environ["PATH"], "HOME": str(data_dir), "HPCPREDICT_CONFIG_PATH": "",
           "HPCPREDICT_DATA_DIR": str(data_dir), "HPCPREDICT_MODELS_KEEP_VERSIONS": keep}
    return subprocess.run([cli, *command, "--no-reload"], env=env, capture_output=True, text=True, timeout=120)


def topology_folder(path, switch):
    path.mkdir()
    Placement(kind="tree", levels=("level1",), paths={"a": (switch,)}).save(path / "topology.json")
    return path


def test_an_old_version_folder_published_again_and_rolled_back_to(tmp_path):
    registry = ModelRegistry(tmp_path / "models")
    old = registry.publish("topology", topology_folder(tmp_path / "old", "s1"))
    new = registry.publish("topology", topology_folder(tmp_path / "new", "s2"))

    again = hpcpredict(tmp_path, "publish", "topology", str(old.path))
    assert again.returncode == 0, again.stderr
    serving = registry.current("topology")
    assert serving.version not in (old.version, new.version)
    assert serving.metadata["republished_from"] == old.version
    assert (serving.model_path / "topology.json").read_bytes() == (old.model_path / "topology.json").read_bytes()

    back = hpcpredict(tmp_path, "rollback", "topology")    # to the one before the serving one
    assert back.returncode == 0, back.stderr
    assert registry.current("topology").version == new.version, back.stdout
    back = hpcpredict(tmp_path, "rollback", "topology", old.version)
    assert back.returncode == 0 and registry.current("topology").version == old.version
    none_older = hpcpredict(tmp_path, "rollback", "topology")
    assert none_older.returncode != 0 and "no version older" in none_older.stderr
    unknown = hpcpredict(tmp_path, "rollback", "topology", "20990101T000000000000Z-abcdef")
    assert unknown.returncode != 0 and "no topology model" in unknown.stderr
    # a broken old version is never made current
    (new.model_path / "topology.json").write_text("{}")
    with pytest.raises(ModelArtifactError, match="checksum"):
        registry.make_current("topology", new.version)
    assert registry.current("topology").version == old.version


def test_publish_keeps_the_newest_versions_and_the_serving_one(tmp_path):
    registry = ModelRegistry(tmp_path / "models")
    first = registry.publish("topology", topology_folder(tmp_path / "m", "s1"))
    for _ in range(3):
        registry.publish("topology", tmp_path / "m")
    registry.make_current("topology", first.version)         # an admin rolled back to the oldest
    done = hpcpredict(tmp_path, "publish", "topology", str(tmp_path / "m"), keep="2")
    assert done.returncode == 0, done.stderr
    versions = registry.versions("topology")
    assert len(versions) == 2 and first.version not in versions   # published over it: no longer serving
    registry.make_current("topology", versions[0])
    assert registry.prune("topology", keep=2) == []
    registry.publish("topology", tmp_path / "m")
    registry.make_current("topology", versions[0])
    assert registry.prune("topology", keep=2) == []           # the serving one stays, beyond the newest 2
    assert versions[0] in registry.versions("topology")
    assert (tmp_path / "models" / "topology" / "_site" / CURRENT).read_text().strip() == versions[0]
    assert hpcpredict(tmp_path, "publish", "topology", str(tmp_path / "m"), keep="1").returncode != 0


_KILLED_PUBLISH = """
import datetime, os, signal, sys
from hpcpredict.daemon import registry as reg
from hpcpredict.topology.placement import Placement
root, source, where = sys.argv[1:]
if where == "staging":                      # killed while copying the model in, two hours ago
    real = reg._dt.datetime
    class TwoHoursAgo(real):
        @classmethod
        def now(cls, tz=None):
            return real.now(tz) - datetime.timedelta(hours=2)
    reg._dt.datetime = TwoHoursAgo
    copy = reg._copy_model_folder
    def copy_then_die(a, b):
        copy(a, b)
        os.kill(os.getpid(), signal.SIGKILL)
    reg._copy_model_folder = copy_then_die
else:                                       # killed with the new CURRENT pointer written, not renamed
    def die(*args):
        os.kill(os.getpid(), signal.SIGKILL)
    reg.os.replace = die
reg.ModelRegistry(root).publish("topology", source)
"""


def test_what_killed_publishes_leave_is_removed_by_the_next_publish(tmp_path):
    """kill -9 of a publish with its CURRENT pointer written but not renamed, and of one (two
    hours ago) in the middle of copying: the next publish removes both leftovers, and leaves a
    staging folder of a publish in progress (younger than LEFTOVER_AGE) alone."""
    registry = ModelRegistry(tmp_path / "models")
    source = topology_folder(tmp_path / "m", "s1")
    serving = registry.publish("topology", source)
    home = tmp_path / "models" / "topology" / "_site"
    for where in ("pointer", "staging"):
        killed = subprocess.run([sys.executable, "-c", _KILLED_PUBLISH, str(tmp_path / "models"), str(source), where],
                                capture_output=True, timeout=60)
        assert killed.returncode == -9, killed.stderr
    left = sorted(p.name for p in home.iterdir() if p.name.startswith("."))
    assert len(left) == 2 and left[0].startswith(".CURRENT.") and left[1].startswith(".tmp-"), left
    assert registry.current("topology").version == serving.version       # CURRENT whole and unchanged
    pointer = home / left[0]
    os.utime(pointer, (pointer.stat().st_mtime - 7200,) * 2)              # two hours pass for it too
    in_progress = home / f".tmp-{serving.version}"                          # another admin's publish, now
    in_progress.mkdir()
    registry.publish("topology", source)
    remaining = sorted(p.name for p in home.iterdir() if p.name.startswith("."))
    assert remaining == [in_progress.name], remaining


def test_publish_and_rollback_by_an_ordinary_user_say_who_may(world_dir):
    """Before: a PermissionError traceback. The models stay as they were."""
    if os.geteuid() != 0:
        pytest.skip("runs the CLI as nobody")
    data = world_dir / "data"
    registry = ModelRegistry(data / "models")
    source = topology_folder(world_dir / "m", "s1")
    registry.publish("topology", source)
    serving = registry.publish("topology", source)
    os.chmod(data, 0o755)
    for path in source.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(source, 0o755)
    cli = os.path.join(os.path.dirname(sys.executable), "hpcpredict")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(data)}
    for command in (["rollback", "topology"], ["publish", "topology", str(source)]):
        done = subprocess.run([cli, *command, "--no-reload"], env=env, capture_output=True, text=True, timeout=120,
                              user=65534, group=65534, extra_groups=[], cwd="/tmp")
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr == (f"hpcpredict: {command[0]}: permission denied in {data / 'models'} (Permission denied): "
                               f"it changes the models the daemon serves; run it as root\n")
    assert registry.current("topology").version == serving.version and len(registry.versions("topology")) == 2


def walltime_folder(path, format_version):
    """A model folder whose own manifest names its format (what the registry reads when pruning)."""
    path.mkdir()
    (path / "manifest.json").write_text(f'{{"kind": "walltime-history", "format_version": {format_version}}}')
    return path


def test_pruning_keeps_the_newest_version_of_each_model_format(tmp_path):
    """After an upgrade, publishes of the newer format must not prune every version an older
    release can read (#40: the downgrade found none left)."""
    registry = ModelRegistry(tmp_path / "models", keep_versions=2)
    older = [registry.publish("walltime", walltime_folder(tmp_path / f"v5-{i}", 5), validate=False)
             for i in range(3)]
    for i in range(4):
        registry.publish("walltime", walltime_folder(tmp_path / f"v6-{i}", 6), validate=False)
    versions = registry.versions("walltime")
    assert len(versions) == 3 and older[-1].version in versions            # 2 newest (format 6) + newest format 5
    assert not {older[0].version, older[1].version} & set(versions)
