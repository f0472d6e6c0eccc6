"""CP2K (Quickstep water energy runs): the derived inputs its cost follows and its SCF step count.

The declarations are checked against what CP2K printed (tests/runtime/test_real_sweeps.py);
``benchmarks/runtime/sweep_cp2k.py`` records them beside its sweep.
"""
from __future__ import annotations

import re

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


def per_basis(volume) -> str:
    """``choose(basis, ...)`` of ``volume(R_O, R_H)`` for each basis (four significant digits)."""
    return "choose(basis, " + ", ".join(f"'{basis}', {volume(radii['O'], radii['H']):.4g}"
                                        for basis, radii in ORBITAL_RADIUS_A.items()) + ")"


NEIGHBOUR_PAIRS = (f"4.18879 / box_a ** 3 * (n_water * (n_water + 1) / 2 * {per_basis(lambda o, h: (2 * o) ** 3)}"
                   f" + 2 * n_water ** 2 * {per_basis(lambda o, h: (o + h) ** 3)}"
                   f" + n_water * (2 * n_water + 1) * {per_basis(lambda o, h: (2 * h) ** 3)})")
DERIVED = [["fft_points", f"round_up(2 * floor(box_a / 0.529177 * sqrt(cutoff_ry) / 6.283185) + 1, {FFT_LENGTHS}) ** 3"],
           ["water_density", "n_water / box_a ** 3"],
           ["neighbour_pairs", NEIGHBOUR_PAIRS],
           ["multigrid_points", "fft_points + " + " + ".join(
               f"round_up(2 * floor(box_a / 0.529177 * sqrt(cutoff_ry / {fraction}) / 6.283185) + 1, {GRID_LENGTHS}) ** 3"
               for fraction in (3, 9, 27))]]


SCF_CONVERGED = re.compile(r"\*\*\* SCF run converged in\s+(\d+) steps \*\*\*")


def scf_steps(report: str) -> int | None:
    """The SCF steps of a Quickstep energy run, from its "*** SCF run converged in N steps ***".

    None where the SCF did not converge (CP2K prints "SCF run NOT converged") or the report has
    no SCF: the count is then not the configuration's convergence count but the MAX_SCF cap.
    """
    steps = [int(match) for match in SCF_CONVERGED.findall(report)]
    return sum(steps) if steps else None
