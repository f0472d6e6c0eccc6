"""The daemon's boundary: the serving core never imports the lab or the CLI.

The serving core is every module of ``daemon/`` outside ``daemon/lab/`` and ``daemon/cli/``:
what ``hpcpredictd`` loads to answer under slurmctld's 300 ms budget. The lab (fitting,
selection, evaluation, trace reading, simulation) hands the core model artifacts and nothing
else. The rules are read from the source (every import, function-local ones included) and from
what a running daemon has loaded; beside them, the product has no import circle, no test
imports a benchmark, and no benchmark reaches a private name of the product.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT_FOLDERS = ("daemon", "topology", "slurm_plugin", "proto")
LAB = "hpcpredict.daemon.lab"
CLI = "hpcpredict.daemon.cli"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["hpcpredict", *parts]) if parts[0] in PRODUCT_FOLDERS else ".".join(parts)


def product_files() -> list[Path]:
    return sorted(p for folder in PRODUCT_FOLDERS for p in (REPO / folder).rglob("*.py")
                  if "__pycache__" not in p.parts and not p.name.endswith("_pb2_grpc.py"))


PRODUCT_MODULES = {module_name(p) for p in product_files()}


def _type_checking_only(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return True
    return False


def imports_of(path: Path) -> set[str]:
    """The dotted modules ``path`` imports (relative imports resolved; ``from X import y`` counts
    ``X.y`` when that is a module of the product)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or _type_checking_only(node, parents):
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join(anchor + ([node.module] if node.module else []))
        submodules = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in PRODUCT_MODULES}
        found.update(submodules)
        if len(submodules) < len(node.names):   # names from the module itself, not only its submodules
            found.add(base)
    return found


def in_package(module: str, *packages: str) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def core_files() -> list[Path]:
    return [p for p in (REPO / "daemon").rglob("*.py")
            if "__pycache__" not in p.parts and not in_package(module_name(p), LAB, CLI)]


def test_the_boundary_exists():
    """Guards the rules below against passing vacuously."""
    assert (REPO / "daemon" / "lab").is_dir() and len(core_files()) > 20
    assert any(in_package(m, LAB) and m != LAB for m in PRODUCT_MODULES)


@pytest.mark.parametrize("path", core_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_core_module_imports_no_lab_and_no_cli(path):
    crossing = sorted(m for m in imports_of(path) if in_package(m, LAB, CLI, "benchmarks"))
    assert not crossing, f"{path.relative_to(REPO)} (serving core) imports {crossing}"


def test_a_running_daemon_has_loaded_no_lab_module(tmp_path):
    """Every core module imported, and a daemon started on the bundled models: no lab, CLI or
    benchmark module in ``sys.modules`` (a plugin list or a lazy load would show here)."""
    core = sorted(module_name(p) for p in core_files())
    code = f"""
import importlib, os, sys
for name in {core!r}:
    importlib.import_module(name)
from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.server import Daemon
with open({str(tmp_path / 'c.toml')!r}, 'w') as f:
    f.write('data_dir = "{tmp_path}/data"\\n[daemon]\\nmetrics = ""\\n[policy]\\nmode = "advise"\\n')
daemon = Daemon(load_config({str(tmp_path / 'c.toml')!r})).start()
daemon.stop(0)
print(sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in ({LAB!r}, {CLI!r}, 'benchmarks'))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"



# SciPy (490 modules, with scikit-learn, which pulls it in, most of a start) is the lab's: the
# daemon's two functions that came from it are numpy's and the standard library's
# (tests/runtime/test_without_scipy.py checks them against SciPy).
HEAVY = ("scipy", "sklearn")


def test_importing_the_server_loads_no_scipy():
    code = f"""
import sys
import hpcpredict.daemon.server
print(sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in {HEAVY!r})))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_serving_daemon_has_loaded_no_scipy(tmp_path):
    """The daemon's start as ``main()`` runs it, on the bundled models, through one Predict
    answered on the local socket: a model loaded at start or on first use would show here."""
    code = f"""
import sys
from hpcpredict.daemon.client import DaemonClient
from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.server import Daemon
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
with open({str(tmp_path / 'c.toml')!r}, 'w') as f:
    f.write('data_dir = "{tmp_path}/data"\\n[daemon]\\nmetrics = ""\\nhook_socket = "{tmp_path}/local.sock"\\n'
            '[policy]\\nmode = "advise"\\n')
daemon = Daemon(load_config({str(tmp_path / 'c.toml')!r})).start()
try:
    request = pb.JobRequest(job=pb.JobIdentity(user="alice"), resources=pb.Resources(nodes=1),
                            script=b"#!/bin/sh\\nlmp -in in.lj\\n")
    estimate = DaemonClient({str(tmp_path / 'local.sock')!r}).predict(request)
    assert estimate.runtime_s > 0, estimate
finally:
    daemon.stop(0)
print(sorted(m for m in sys.modules if any(m == p or m.startswith(p + '.') for p in {HEAVY!r})))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"

def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def test_no_import_circle_in_the_product():
    graph = {}
    for path in product_files():
        name = module_name(path)
        # every import counts, function-local ones too (a local import that dodges a circle is
        # still one); a package is an edge only when names are taken from its __init__
        graph[name] = {m for m in imports_of(path) if m in PRODUCT_MODULES and m != name}
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_test_imports_a_benchmark():
    offenders = sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("*.py")
                       if "__pycache__" not in p.parts
                       and any(in_package(m, "benchmarks") for m in imports_of(p)))
    assert offenders == []


def test_no_benchmark_reaches_a_private_name_of_the_product():
    offenders = []
    for path in (REPO / "benchmarks").rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound = set()   # names bound to the product's modules or objects
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("hpcpredict"):
                for alias in node.names:
                    if alias.name.startswith("_") or any(part.startswith("_") for part in node.module.split(".")):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {node.module}.{alias.name}")
                    bound.add(alias.asname or alias.name)
            elif isinstance(node, ast.Import):
                bound.update(alias.asname or alias.name.split(".")[0] for alias in node.names
                             if alias.name.startswith("hpcpredict"))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and isinstance(node.value, ast.Name) and node.value.id in bound):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value.id}.{node.attr}")
    assert offenders == []


# Lab modules a benchmark may import besides the families' faces, and why.
BENCHMARK_LAB_INTERNALS = {
    f"{LAB}.refresh": "the refresh pipeline, the lab's own (no family)",
    f"{LAB}.comm.training": "SimGrid children import the comm face: it leaves out scikit-learn",
    f"{LAB}.comm.evaluation": "the same (SciPy)",
    **{f"{LAB}.runtime.applications.{app}": "one module per application's declarations"
       for app in ("cp2k", "gromacs", "lammps", "nwchem")},
    **{f"{LAB}.runtime.{part}": "benchmarks/dev/runtime/selection_study.py studies the selection rule's parts"
       for part in ("selection", "blend", "gaussian_process")},
    f"{LAB}.runtime.agreement": "benchmarks/dev/runtime/user_agreement.py studies the check's factor",
}
LAB_FACES = {f"{LAB}.{family}" for family in ("runtime", "history", "comm", "scaling", "scheduling")}


def test_benchmarks_reach_the_lab_through_its_faces():
    offenders = []
    for path in (REPO / "benchmarks").rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        named = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | \
            {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        for module in named:     # `from <face> import simulate` names the face, whatever else is called so
            if in_package(module, LAB) and module != LAB and module not in LAB_FACES \
                    and module not in BENCHMARK_LAB_INTERNALS:
                offenders.append(f"{path.relative_to(REPO)}: {module}")
    assert offenders == []


# The core's packages: everything outside one imports its face (``__init__``), never its modules.
CORE_PACKAGES = ("hpcpredict.daemon.store", "hpcpredict.daemon.listeners")
# Tests that reach a package's module, and why (a module global only the module itself reads).
TEST_REACHES_INTO = {
    ("tests/store/test_store_suite.py", "hpcpredict.daemon.store.sqlite"):
        "winds MIGRATIONS back to build a store of the previous schema",
    ("tests/store/test_store_suite.py", "hpcpredict.daemon.store.postgres"): "the same, on PostgreSQL",
    ("tests/fuzz/targets.py", "hpcpredict.daemon.listeners.grpc_adapter"):
        "fuzzes the gRPC listener's own lenient decoder (_lenient, _BadRequest)",
}


def _project_files() -> list[Path]:
    folders = (*PRODUCT_FOLDERS, "tests", "benchmarks", "contrib")
    return sorted(p for folder in folders for p in (REPO / folder).rglob("*.py")
                  if "__pycache__" not in p.parts and not p.name.endswith("_pb2_grpc.py"))


def _reaches_into(path: Path) -> list[str]:
    """The modules of a core package that ``path`` (outside that package) imports."""
    name = module_name(path)
    return sorted(m for m in imports_of(path) for package in CORE_PACKAGES
                  if m.startswith(package + ".") and not in_package(name, package))


def test_the_core_packages_have_faces_and_internals():
    """Guards the rule below against passing vacuously."""
    for package in CORE_PACKAGES:
        folder = REPO / Path(*package.split(".")[1:])
        face = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
        assert ast.get_docstring(face) and any(isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__"
                                               for n in face.body), f"{package} has no face (docstring, __all__)"
        assert sum(1 for m in PRODUCT_MODULES if m.startswith(package + ".")) >= 3


@pytest.mark.parametrize("path", _project_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_a_core_package_is_imported_through_its_face(path):
    relative = str(path.relative_to(REPO))
    reached = [m for m in _reaches_into(path) if (relative, m) not in TEST_REACHES_INTO]
    assert not reached, f"{relative} imports {reached}: import from the package's __init__ (add the name there)"


def test_every_listed_reach_into_a_package_is_still_made():
    for relative, module in TEST_REACHES_INTO:
        assert module in _reaches_into(REPO / relative), f"{relative} no longer imports {module}: drop it from the list"
