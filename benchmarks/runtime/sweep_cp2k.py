"""CP2K (Debian `cp2k`, `cp2k-data`): Quickstep PBE energy of water molecules in a cubic box.

Inputs: molecules ``n_water`` (placed on a 3 Å grid), box edge ``box_a`` (Å), plane-wave
``cutoff_ry``, MOLOPT basis ``basis`` (SZV, DZVP, TZVP; GTH-PBE pseudopotentials, both from
cp2k-data), MPI ranks ``ranks`` (`mpirun -np`, one OpenMP thread each).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

from benchmarks.runtime.sweep import mpirun, report_ends_with

PACKAGE = "cp2k"
INPUTS = ["n_water", "box_a", "cutoff_ry", "basis", "ranks"]
RANGES = {"n_water": "1-3", "box_a": "6-8 by 0.5 (design 'box': 6-8.5 by 0.25)", "cutoff_ry": "100-200 by 25", "basis": "SZV|DZVP|TZVP",
          "ranks": "1|2"}
COMMAND = "mpirun -np RANKS cp2k.psmp -i water.inp -o water.out"
# What the cost follows (measured 2026-11-24; see tests/data/runtime/SOURCES.md):
# * fft_points: the finest real-space grid, FFT_LENGTHS[i]³ where FFT_LENGTHS[i] is the first length
#   CP2K accepts that is ≥ 2·floor(a·√E/2π) + 1 (a the box edge in bohr, E the cutoff in Ry:
#   |G| ≤ √E in bohr⁻¹). Checked against CP2K 2023.1's own "PW_GRID| Bounds" for all 55 (box,
#   cutoff) pairs of the sweeps (edges 6-8.5 by 0.25 Å, cutoffs 100-200 by 25 Ry). It jumps by up to
#   (54/48)³ = 1.42 between neighbouring boxes, which no smooth function of the inputs follows.
# * water_density: molecules per Å³. At a fixed SCF step count a denser box costs more per step
#   (3 waters, SZV, 100 Ry, 12 SCF steps each: 3.6 s of CPU in a 6 Å box, 2.3 s in a 7 Å box):
#   more basis-function pairs overlap across the periodic images.
# * neighbour_pairs: the atom pairs CP2K's neighbour list holds (periodic images included), which
#   the collocation of the density and the integration of the potential loop over (2.8 of 3.8 s of
#   SCF in one water, DZVP, 150 Ry, 7 Å, by CP2K's timing report). Two atoms pair when they are
#   closer than the sum of their kinds' orbital basis radii (ORBITAL_RADIUS_A, as CP2K printed
#   them); those radii (5-10 Å) exceed the box, so each pair of atoms i ≤ j (i = j included) meets
#   about (4π/3)(R_i + R_j)³ / V of the other's images. Per basis the three kinds of pair (O-O, O-H,
#   H-H) give the coefficients below, times n(n+1)/2, 2n² and n(2n+1) pairs of atoms for n
#   waters. Checked against CP2K's "Total number of particle pairs" for 1-3 waters, 6-8.5 Å boxes
#   and every basis (cp2k_basis.json, benchmarks/runtime/cp2k_basis.py): within 7 %, 18 % where
#   CP2K counted fewer than 100 pairs. It grows with the molecules squared, over the volume, and
#   five times faster with DZVP/TZVP (their diffuse H functions) than with SZV: what
#   water_density and the basis stood for, in one number that a single exponent can follow.
# * multigrid_points: the points of all four real-space grids (NGRIDS 4, CP2K's default: cutoffs
#   E, E/3, E/9, E/27), each level's edge by the finest grid's rule with the lengths CP2K accepts
#   below 36 too (GRID_LENGTHS). Checked against CP2K's "PW_GRID| Bounds" of every level for the
#   55 (box, cutoff) pairs of the sweeps (cp2k_multigrid.json, benchmarks/runtime/cp2k_grids.py).
#   The coarse grids hold the collocation of the diffuse Gaussians (REL_CUTOFF 40) and are
#   transformed too; their edges jump at other boxes than the finest one's (7 Å, 100 Ry: 45, 25,
#   15, 9 points; 6.5 Å: 40, 24, 15, 8). The expression has 195 parts, near derived.py's limit of
#   200 (MAX_NODES): a longer length list needs a second derived input.
# Not declared: the finest grid's edge as a category (each FFT length its own level, as GROMACS's
# pme_grid: an FFT's cost per point depends on the length's factors): CV on training halves (4
# splits, 50 % training, 2026-11-26) boosted trees 5.9 → 7.1 %, log-linear 6.8 → 7.5, Gaussian
# process 6.6 → 6.4 %: ~10 levels over ~100 configurations split the runs more than they explain.
FFT_LENGTHS = "36, 40, 45, 48, 54, 60, 64, 72, 75, 80, 81, 90, 96, 100, 108, 120, 125, 128"
GRID_LENGTHS = "8, 9, 12, 15, 18, 20, 24, 25, 27, 30, 32, " + FFT_LENGTHS
ORBITAL_RADIUS_A = {"SZV": {"O": 5.902582, "H": 4.949093}, "DZVP": {"O": 6.532391, "H": 10.100942},
                    "TZVP": {"O": 6.920315, "H": 10.100942}}


def _per_basis(volume) -> str:
    """``choose(basis, ...)`` of ``volume(R_O, R_H)`` for each basis (four significant digits)."""
    return "choose(basis, " + ", ".join(f"'{basis}', {volume(radii['O'], radii['H']):.4g}"
                                        for basis, radii in ORBITAL_RADIUS_A.items()) + ")"


NEIGHBOUR_PAIRS = (f"4.18879 / box_a ** 3 * (n_water * (n_water + 1) / 2 * {_per_basis(lambda o, h: (2 * o) ** 3)}"
                   f" + 2 * n_water ** 2 * {_per_basis(lambda o, h: (o + h) ** 3)}"
                   f" + n_water * (2 * n_water + 1) * {_per_basis(lambda o, h: (2 * h) ** 3)})")
DERIVED = [["fft_points", f"round_up(2 * floor(box_a / 0.529177 * sqrt(cutoff_ry) / 6.283185) + 1, {FFT_LENGTHS}) ** 3"],
           ["water_density", "n_water / box_a ** 3"],
           ["neighbour_pairs", NEIGHBOUR_PAIRS],
           ["multigrid_points", "fft_points + " + " + ".join(
               f"round_up(2 * floor(box_a / 0.529177 * sqrt(cutoff_ry / {fraction}) / 6.283185) + 1, {GRID_LENGTHS}) ** 3"
               for fraction in (3, 9, 27))]]
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


SCF_CONVERGED = re.compile(r"\*\*\* SCF run converged in\s+(\d+) steps \*\*\*")


def scf_steps(report: str) -> int | None:
    """The SCF steps of a Quickstep energy run, from its "*** SCF run converged in N steps ***".

    None where the SCF did not converge (CP2K prints "SCF run NOT converged") or the report has
    no SCF: the count is then not the configuration's convergence count but the MAX_SCF cap.
    """
    steps = [int(match) for match in SCF_CONVERGED.findall(report)]
    return sum(steps) if steps else None


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
