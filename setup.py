"""Maps the design card's top-level folders onto the `hpcpredict` namespace.

`daemon/` installs as `hpcpredict.daemon`, `topology/` as `hpcpredict.topology`, and so on, so
no import can collide with a PyPI name (`daemon` is python-daemon's). Sub-packages are found
by walking each folder, so adding one needs no edit here.

The mapping is a folder, not a table: `build/namespace/hpcpredict/<folder>` is a symlink to
`<folder>/`, and `build/namespace` is the one package root (`package_dir={"": ...}`). An
import path is then a folder path, so an editable install is a plain `.pth` line naming
`build/namespace` (setuptools' static-path strategy, not its import hook), which mypy, pyright
and IDEs follow like Python does, and a new module is importable without reinstalling.
Pure Python: nothing is compiled.
"""
import json
import os
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

FOLDERS = ("daemon", "topology", "slurm_plugin", "proto")
NAMESPACE = "hpcpredict"
PACKAGE_ROOT = os.path.join("build", "namespace")   # git-ignored; made here, on every build
DATA = ["py.typed", "*.lua", "*.proto", "*.pyi", "*.sh", "*.json", "*.toml", "*.skops", "*.npz", "*.txt", "*.swf", "*.service"]


def _link_folders():
    """`build/namespace/hpcpredict/<folder>` -> `<folder>/` for each folder (idempotent)."""
    namespace_dir = os.path.join(PACKAGE_ROOT, NAMESPACE)
    os.makedirs(namespace_dir, exist_ok=True)
    for folder in FOLDERS:
        link = os.path.join(namespace_dir, folder)
        target = os.path.relpath(folder, namespace_dir)
        if os.path.islink(link) and os.readlink(link) == target:
            continue
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(target, link)


def _packages():
    # The namespace itself is listed (it has no __init__.py) so that every package sits under
    # one root, which is what lets setuptools use a static path for an editable install.
    packages = [NAMESPACE]
    for folder in FOLDERS:
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            if "__init__.py" in files:
                packages.append(NAMESPACE + "." + root.replace(os.sep, "."))
    return packages


_link_folders()
packages = _packages()
package_data = {name: list(DATA) for name in packages}
package_data["hpcpredict.daemon"].append("bundled_models/**/*")  # example models (not a package)


def _commit() -> str:
    """The commit of the tree being built (``+dirty`` with uncommitted changes), "" outside git."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return head + ("+dirty" if dirty else "") if len(head) == 40 else ""


class BuildWithCommit(build_py):
    """Records the commit built in hpcpredict/daemon/build.json (read by daemon/buildinfo.py:
    `--version`, `hpcpredict status`): an installed wheel has no git to ask."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, NAMESPACE, "daemon", "build.json")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as handle:
            json.dump({"commit": _commit()}, handle)


setup(packages=packages, package_dir={"": PACKAGE_ROOT}, package_data=package_data,
      cmdclass={"build_py": BuildWithCommit})
