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
