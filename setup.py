"""Maps the design card's top-level folders onto the `hpcpredict` namespace.

`daemon/` installs as `hpcpredict.daemon`, `topology/` as `hpcpredict.topology`, and so on, so
no import can collide with a PyPI name (`daemon` is python-daemon's). Sub-packages are found
by walking each folder, so adding one needs no edit here.
Pure Python: nothing is compiled.
"""
import os

from setuptools import setup

FOLDERS = ("daemon", "topology", "slurm_plugin", "proto")
DATA = ["*.lua", "*.proto", "*.pyi", "*.sh", "*.json", "*.toml", "*.skops", "*.npz", "*.txt", "*.swf", "*.service"]


def _packages():
    packages, package_dir = [], {}
    for folder in FOLDERS:
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            if "__init__.py" not in files:
                continue
            name = "hpcpredict." + root.replace(os.sep, ".")
            packages.append(name)
            package_dir[name] = root
    return packages, package_dir


packages, package_dir = _packages()
package_data = {name: list(DATA) for name in packages}
package_data["hpcpredict.daemon"].append("bundled_models/**/*")  # example models (not a package)


setup(packages=packages, package_dir=package_dir, package_data=package_data)
