"""NWChem (water SCF/DFT energy runs): the derived inputs its cost follows and its iteration count.

The declarations are checked against what NWChem printed (tests/runtime/test_real_sweeps.py);
``benchmarks/runtime/sweep_nwchem.py`` records them beside its sweep.
"""
from __future__ import annotations

import re

# What the cost follows: the number of basis functions, n_water times the functions per molecule
# of the named basis (cartesian, NWChem's default), as NWChem 7.0.2 printed them ("functions =",
# tests/data/runtime/nwchem_functions.json). One number for every basis lets a model share one
# exponent of the functions across bases instead of learning each basis from its own runs:
# under cross-validation on training halves it cut the log-linear model's MAPE from 38 to 33 %
# (10 % training) and 21 to 19 % (25 %), and left 50 % unchanged (13.1 %), 2026-11-24.
# Not declared (CV on training halves, 5 splits, 50 % training, 2026-11-26; Gaussian process /
# log-linear / boosted trees 7.00 / 10.6 / 9.9 % with basis_functions alone): the primitive
# Gaussians per water (sto-3g 21, 3-21g 21, 6-31g 30, 6-31g* 36, cc-pvdz 41, from nwchem-data's
# library; they order 3-21g below 6-31g, which have the same functions) 7.13 / 10.4 / 9.9 %; the
# functions of one method only (choose(method, 'dft', basis_functions, 'scf', 1) and its mirror,
# an exponent per method) 7.3 / 10.3 / 9.3 % and 7.4 / 10.7 / 9.5 %.
BASES = ["sto-3g", "3-21g", "6-31g", "6-31g*", "cc-pvdz"]
FUNCTIONS_PER_WATER = {"sto-3g": 7, "3-21g": 13, "6-31g": 13, "6-31g*": 19, "cc-pvdz": 25}
DERIVED = [["basis_functions", "n_water * choose(basis, "
            + ", ".join(f"'{basis}', {count}" for basis, count in FUNCTIONS_PER_WATER.items()) + ")"]]

# The iteration tables NWChem 7.0.2 prints: DFT (B3LYP) "convergence iter energy DeltaE ..." rows
# "d= 0,ls=0.0,diis     3   -152.80..."; SCF (quadratically convergent RHF) "iter energy gnorm
# gmax time" rows "      3     -152.00...  6.04D-02 ...", each a macro-iteration (the inner
# Newton-Raphson steps are not printed at the default print level).
DFT_ITERATION = re.compile(r"^\s*d=\s*\d+,ls=\s*[\d.]+(?:,diis)?\s+(\d+)\s+-?\d+\.\d+", re.M)
SCF_ITERATION = re.compile(r"^\s+(\d+)\s+-?\d+\.\d+\s+\d\.\d+D[+-]\d+\s+\d\.\d+D[+-]\d+\s+[\d.]+\s*$", re.M)


def scf_iterations(report: str) -> int | None:
    """The SCF or DFT iterations of a NWChem energy run: the last iteration number of its table.

    None where the report has no table or says the calculation did not converge.
    """
    if "Calculation failed to converge" in report or "SCF failed to converge" in report:
        return None
    numbers = [int(match) for match in DFT_ITERATION.findall(report)] \
        or [int(match) for match in SCF_ITERATION.findall(report)]
    return max(numbers) if numbers else None
