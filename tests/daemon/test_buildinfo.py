"""`--version` and `hpcpredict status` name the build: the release and the commit built.

The version alone was 0.1.0 at every commit (#40). A checkout run in place reads git; a wheel
carries build.json written when it was built (setup.py); a tree without git metadata says
`unknown` and why instead of a commit it cannot know."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hpcpredict.daemon.buildinfo import build
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

REPO = Path(__file__).resolve().parents[2]


def head(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.parametrize("module, prog", [("hpcpredict.daemon.cli.main", "hpcpredict"),
                                          ("hpcpredict.daemon.server", "hpcpredictd")])
def test_version_of_a_checkout_names_its_commit(module, prog):
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.argv[0] = {prog!r}; "
                           f"from {module} import main; main()", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith(f"{prog} 0.1.0 (commit {head(REPO)}") and line.endswith(")"), line


def wheel_of(tree: Path, out: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "-w", str(out), str(tree)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = out.glob("hpcpredict-*.whl")
    return wheel


def version_from_wheel(wheel: Path, where: Path) -> str:
    """`hpcpredictd --version` of the unpacked wheel (its own hpcpredict first on the path)."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(where)
    code = "import sys; sys.argv[0] = 'hpcpredictd'; from hpcpredict.daemon.server import main; main()"
    done = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True, text=True, timeout=60,
                          cwd=where, env={**os.environ, "PYTHONPATH": str(where)})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_wheel_records_the_commit_it_was_built_from_and_a_tree_without_git_says_unknown(tmp_path):
    tree = tmp_path / "tree"
    # a clean clone at HEAD: the commit the wheel must name (no +dirty, whatever this checkout holds)
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(tree)], check=True, timeout=300)
    wheel = wheel_of(tree, tmp_path / "wheel")
    with zipfile.ZipFile(wheel) as archive:
        recorded = json.loads(archive.read("hpcpredict/daemon/build.json"))
    assert recorded == {"commit": head(tree)}
    assert version_from_wheel(wheel, tmp_path / "installed") == f"hpcpredictd 0.1.0 (commit {head(tree)})"
    # the same source without .git (an unpacked tarball): true, not a guess
    shutil.rmtree(tree / ".git")
    shutil.rmtree(tree / "build", ignore_errors=True)
    bare = wheel_of(tree, tmp_path / "bare-wheel")
    line = version_from_wheel(bare, tmp_path / "bare-installed")
    assert line == "hpcpredictd 0.1.0 (commit unknown (built from a tree without git metadata))", line


def test_status_json_has_the_build(world_dir):
    from hpcpredict.daemon.cli.common import message_dict
    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.server import Daemon

    config = load_config(None, environ={"HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir),
                                        "HPCPREDICT_CONFIG_PATH": ""})
    daemon = Daemon(config)
    try:
        status = message_dict(daemon.service.call("GetStatus", pb.StatusRequest(), os.getuid()))
    finally:
        daemon.store.close()
    assert status["build"] == {"version": "0.1.0", "commit": build()["commit"]}
    assert status["build"]["commit"].startswith(head(REPO))
