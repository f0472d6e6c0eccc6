"""CP2K (Debian `cp2k`, `cp2k-data`): Quickstep PBE energy of water molecules in a cubic box.

Inputs: molecules ``n_water`` (placed on a 3 Å grid), box edge ``box_a`` (Å), plane-wave
``cutoff_ry``, MOLOPT basis ``basis`` (SZV, DZVP, TZVP; GTH-PBE pseudopotentials, both from
cp2k-data), MPI ranks ``ranks`` (`mpirun -np`, one OpenMP thread each).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.runtime.sweep import mpirun, report_ends_with
from hpcpredict.daemon.lab.runtime.applications.cp2k import DERIVED, scf_steps  # recorded with the sweep (DERIVED)

PACKAGE = "cp2k"
INPUTS = ["n_water", "box_a", "cutoff_ry", "basis", "ranks"]
RANGES = {"n_water": "1-3", "box_a": "6-8 by 0.5 (design 'box': 6-8.5 by 0.25)", "cutoff_ry": "100-200 by 25", "basis": "SZV|DZVP|TZVP",
          "ranks": "1|2"}
COMMAND = "mpirun -np RANKS cp2k.psmp -i water.inp -o water.out"
DATA = "/usr/share/cp2k"

INPUT = """&GLOBAL
  PROJECT water
  RUN_TYPE ENERGY
  PRINT_LEVEL LOW
&END GLOBAL
&FORCE_EVAL
  METHOD Quickstep
  &DFT
    BASIS_SET_FILE_NAME {data}/BASIS_MOLOPT
    POTENTIAL_FILE_NAME {data}/GTH_POTENTIALS
    &MGRID
      CUTOFF {cutoff_ry}
      REL_CUTOFF 40
    &END MGRID
    &SCF
      EPS_SCF 1.0E-6
      MAX_SCF 50
      SCF_GUESS ATOMIC
    &END SCF
    &XC
      &XC_FUNCTIONAL PBE
      &END XC_FUNCTIONAL
    &END XC
  &END DFT
  &SUBSYS
    &CELL
      ABC {box_a} {box_a} {box_a}
    &END CELL
    &COORD
{coords}
    &END COORD
    &KIND H
      BASIS_SET {basis}-MOLOPT-GTH
      POTENTIAL GTH-PBE-q1
    &END KIND
    &KIND O
      BASIS_SET {basis}-MOLOPT-GTH
      POTENTIAL GTH-PBE-q6
    &END KIND
  &END SUBSYS
&END FORCE_EVAL
"""


def water_coordinates(n: int, spacing: float = 3.0) -> list[tuple[str, float, float, float]]:
    """n water molecules (O-H 0.96 Å, 104.5°) on a 2x2x2 grid centred at the origin."""
    atoms = []
    for i in range(n):
        x, y, z = ((i >> 0) & 1) * spacing, ((i >> 1) & 1) * spacing, ((i >> 2) & 1) * spacing
        x, y, z = x - spacing / 2, y - spacing / 2, z - spacing / 2
        atoms += [("O", x, y, z), ("H", x + 0.757, y + 0.586, z), ("H", x - 0.757, y + 0.586, z)]
    return atoms


def draw_config(rng) -> dict:
    return {"n_water": rng.randint(1, 3), "box_a": rng.randrange(12, 17) / 2,
            "cutoff_ry": rng.randrange(100, 201, 25), "basis": rng.choice(["SZV", "DZVP", "TZVP"]),
            "ranks": rng.choice([1, 2])}


BOX_SCAN_EDGES = [6.0 + 0.25 * i for i in range(11)]  # 6.0-8.5 Å
BOX_SCAN_LENGTH = 4
_box_scan_pending: list[dict] = []


def draw_box_scan(rng) -> dict:
    """The "box" design: scans of BOX_SCAN_LENGTH box edges at one (n_water, cutoff, basis, ranks).

    The first design drew every input independently, so few pairs of configurations differed in
    the box alone, and CP2K's cost is not monotone in it (the molecules, 3 Å apart, crowd their
    periodic images in a 6 Å box). Consecutive calls return the scan's configurations in a random
    order of edges, so a sweep's blocks mix scans. 3 molecules with the larger bases are kept to
    cutoffs up to 150 Ry so that a run stays under ~20 s of CPU.
    """
    if not _box_scan_pending:
        n_water, basis = rng.randint(1, 3), rng.choice(["SZV", "DZVP", "TZVP"])
        cutoffs = range(100, 151, 25) if n_water == 3 and basis != "SZV" else range(100, 201, 25)
        base = {"n_water": n_water, "cutoff_ry": rng.choice(cutoffs), "basis": basis, "ranks": rng.choice([1, 2])}
        _box_scan_pending.extend({"n_water": n_water, "box_a": box_a, "cutoff_ry": base["cutoff_ry"],
                                  "basis": basis, "ranks": base["ranks"]}
                                 for box_a in rng.sample(BOX_SCAN_EDGES, BOX_SCAN_LENGTH))
    return _box_scan_pending.pop(0)


DESIGNS = {"box": draw_box_scan}


def version() -> str:
    out = subprocess.run(["cp2k.psmp", "--version"], capture_output=True, text=True).stdout
    return next((line.strip() for line in out.splitlines() if line.strip().startswith("CP2K version")), "")


def completed(folder: Path) -> bool:
    return report_ends_with(folder / "water.out", "PROGRAM ENDED AT")


def iterations(folder: Path) -> int | None:
    try:
        return scf_steps((folder / "water.out").read_text(errors="replace"))
    except OSError:
        return None


def prepare(config: dict, folder: Path) -> list[str]:
    (folder / "water.out").unlink(missing_ok=True)
    coords = "\n".join(f"      {e} {x + config['box_a'] / 2:.4f} {y + config['box_a'] / 2:.4f} {z + config['box_a'] / 2:.4f}"
                       for e, x, y, z in water_coordinates(config["n_water"]))
    (folder / "water.inp").write_text(INPUT.format(data=DATA, coords=coords, **config))
    return mpirun(config["ranks"], ["cp2k.psmp", "-i", "water.inp", "-o", "water.out"])
