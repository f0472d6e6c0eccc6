"""Maps the design card's top-level folders onto the `hpcpredict` namespace.

`daemon/` installs as `hpcpredict.daemon`, `topology/` as `hpcpredict.topology`, and so on, so
no import can collide with a PyPI name (`daemon` is python-daemon's). Sub-packages are found
by walking each folder, so adding one needs no edit here.

The daemon's gRPC front end (`daemon/native/grpcfront.cpp`, the `hpcpredict.daemon._grpcfront`
module) is built against Debian's libgrpc++-dev and pybind11-dev (contrib/apt-packages.txt).
Without them the build skips it and the daemon serves with gRPC Python instead (slower).
"""
import os
import subprocess
import sys

from setuptools import Extension, setup

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


def _grpc_front() -> list[Extension]:
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "grpc++"], capture_output=True,
                               text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        print("setup.py: grpc++ not found (apt install libgrpc++-dev): the daemon will serve with gRPC Python",
              file=sys.stderr)
        return []
    if not os.path.exists("/usr/include/pybind11/pybind11.h"):
        print("setup.py: pybind11 not found (apt install pybind11-dev): the daemon will serve with gRPC Python",
              file=sys.stderr)
        return []
    compile_flags = [flag for flag in flags if flag.startswith(("-I", "-D"))]
    link_flags = [flag for flag in flags if not flag.startswith(("-I", "-D"))]
    return [Extension("hpcpredict.daemon._grpcfront", ["daemon/native/grpcfront.cpp"], language="c++",
                      extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden", *compile_flags],
                      extra_link_args=link_flags)]


setup(packages=packages, package_dir=package_dir, package_data=package_data, ext_modules=_grpc_front())
