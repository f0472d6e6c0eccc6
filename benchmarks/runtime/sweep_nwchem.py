"""NWChem (Debian `nwchem`, `nwchem-openmpi`, `nwchem-data`): SCF or DFT energy of a water cluster.

Inputs: molecules ``n_water`` (placed on a 3 Å grid), Gaussian ``basis`` (from nwchem-data's
library), ``method`` (scf = RHF, dft = B3LYP), MPI ranks ``ranks`` (`mpirun -np`).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.runtime.sweep import mpirun
from benchmarks.runtime.sweep_cp2k import water_coordinates
from hpcpredict.daemon.lab.runtime.applications.nwchem import BASES, DERIVED, scf_iterations  # recorded with the sweep (DERIVED)

PACKAGE = "nwchem"
INPUTS = ["n_water", "basis", "method", "ranks"]
RANGES = {"n_water": "1-4", "basis": "|".join(BASES), "method": "scf|dft", "ranks": "1|2"}
COMMAND = "mpirun -np RANKS nwchem water.nw > water.out"
STDOUT = "water.out"   # NWChem writes its report to standard output

INPUT = """start water
scratch_dir {folder}
permanent_dir {folder}
geometry units angstrom noautosym
{coords}
end
basis
  * library {basis}
end
{method_block}
task {method} energy
"""


def draw_config(rng) -> dict:
    return {"n_water": rng.randint(1, 4), "basis": rng.choice(BASES), "method": rng.choice(["scf", "dft"]),
            "ranks": rng.choice([1, 2])}


def version() -> str:
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", "nwchem"], capture_output=True, text=True).stdout


def iterations(folder: Path) -> int | None:
    try:
        return scf_iterations((folder / STDOUT).read_text(errors="replace"))
    except OSError:
        return None


def prepare(config: dict, folder: Path) -> list[str]:
    for stale in folder.glob("water.*"):  # water.out too: a failed run leaves no stale report
        stale.unlink()
    coords = "\n".join(f"  {e} {x:.4f} {y:.4f} {z:.4f}" for e, x, y, z in water_coordinates(config["n_water"]))
    block = "dft\n  xc b3lyp\n  iterations 50\nend" if config["method"] == "dft" else "scf\n  maxiter 50\nend"
    (folder / "water.nw").write_text(INPUT.format(folder=folder, coords=coords, basis=config["basis"],
                                                  method_block=block, method=config["method"]))
    return mpirun(config["ranks"], ["nwchem", "water.nw"])
