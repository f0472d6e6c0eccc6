"""LAMMPS (the Lennard-Jones melt deck): the derived inputs its cost follows.

The declarations are checked against what LAMMPS counted (tests/runtime/test_real_sweeps.py);
``benchmarks/runtime/sweep_lammps.py`` records them beside its sweep.
"""
from __future__ import annotations

# What the cost follows: the pair work of a step, atoms (4 per fcc cell) times the neighbours each
# keeps in its list, which grow with the volume of the list's sphere, (cutoff + skin)³ (the melt's
# density is fixed). The log inputs only give cutoff and skin separate exponents. Judged on the
# training halves (`derived_check.py lammps`, 3 splits, 2026-11-24), it lowered every learner's CV
# MAPE: start-up + steps 5.5 → 5.2 % at 50 % training and 6.1 → 5.6 % at 25 %, log-linear and
# boosted trees by 0.1-0.5 points. With the steps multiplied in (the whole run's pair work) it
# helped log-linear more but cost start-up + steps (6.1 → 6.8 % at 25 %).
# * neighbour_builds: the neighbour-list builds of the run. The deck rebuilds when an atom has
#   moved half the skin (`check yes`), so builds grow with the steps and the atoms' speed, √temp,
#   over the skin. Against the builds LAMMPS counted for the 180 configurations (`lammps_melt.csv`,
#   `neigh_builds`): a log-log fit gives exponents 1.09 (steps), 0.52 (temp), −0.99 (skin), 0.07
#   or less for the box and cutoff; 0.026 · steps · √temp / skin is within 15 % of the count in 93 %
#   of them (2 to 140 builds). As a rate per step (√temp / skin) it helped no learner; as the count
#   it lowered every learner's CV MAPE on the training halves (`derived_check.py lammps`, 3 splits,
#   50 % training, 2026-11-26): Gaussian process 4.78 → 4.62 %, log-linear 5.64 → 5.43, start-up +
#   steps 5.15 → 5.11, boosted trees 6.53 → 5.98 (rank accuracy up for all but start-up + steps).
# Not declared: the ghost atoms a serial periodic run copies each step, 0.8442 · Π(1.6796·edge +
# 2·(cutoff + skin)) − atoms (box edges in lattice cells of 1.6796 σ), alone or as all atoms with
# them: Gaussian process CV MAPE 4.33 → 4.42 / 4.32 %, log-linear 5.43 → 5.50 / 5.54 (3 splits,
# 50 % training, 2026-11-26). The box edges and cutoff + skin already carry them.
DERIVED = [["pair_cost", "4 * x * y * z * (cutoff + skin) ** 3"],
           ["neighbour_builds", "0.026 * steps * sqrt(temp) / skin"]]
