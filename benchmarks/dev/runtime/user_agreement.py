"""How far honest users' runs of one application disagree, and how far poisoning runs do: the
ratio :mod:`hpcpredict.daemon.lab.runtime.agreement` compares with ``AGREE_FACTOR``.

Real runs (tests/data/runtime/*.csv) are dealt among 2-6 users by configuration, at random or
in contiguous ranges of the problem size (a user who runs only the big cases), 20 deals each;
for each deal the largest ratio of any user (leave-one-user-out error over the others' own
cross-validated error) is kept. Poisoning: a second user submits the victim's configurations
(a random third of them) with runtimes of 1/700 of the victim's (24.6 min -> 2 s); the
attacker's ratio and the victim's are printed.

    .venv/bin/python benchmarks/dev/runtime/user_agreement.py [lammps_melt gromacs_water]
"""
from __future__ import annotations

import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.runtime import read_runs_csv, usable_inputs, user_disagreement
from hpcpredict.daemon.lab.runtime.agreement import AGREE_FACTOR

DATA = Path(__file__).resolve().parents[3] / "tests" / "data" / "runtime"
SIZE = {"lammps_melt": ("x", "y", "z", "steps"), "gromacs_water": ("box_nm", "box_nm", "box_nm", "nsteps")}


def ratios(table, inputs) -> dict[str, float]:
    """Each user's leave-one-user-out error over the limit it is held to, times AGREE_FACTOR:
    her error over the others' own (the factor the check's limit is chosen as)."""
    measured = user_disagreement(table, np.arange(len(table.y)), inputs=inputs)
    return {user: AGREE_FACTOR * by_others / limit for user, (by_others, limit) in measured.items()}


def main(names: list[str]) -> None:
    for name in names:
        table = read_runs_csv(DATA / f"{name}.csv", target="runtime_s")
        inputs, _, _ = usable_inputs(table, np.arange(len(table.y)), time_share=None)
        configs = np.unique(table.groups)
        size = {g: math.prod(float(table.rows[np.nonzero(table.groups == g)[0][0]][k]) for k in SIZE[name])
                for g in configs}
        for how in ("random", "contiguous"):
            worst = []
            for seed in range(20):
                rng = np.random.default_rng(seed)
                k = int(rng.integers(2, 7))
                order = rng.permutation(configs) if how == "random" else np.array(sorted(configs, key=size.get))
                owner = {g: f"u{i * k // len(order)}" for i, g in enumerate(order)}
                users = np.array([owner[g] for g in table.groups])
                worst.append(max(ratios(replace(table, users=users), inputs).values()))
            print(f"{name} honest {how}: largest ratio per deal median {np.median(worst):.2f} max {max(worst):.2f}")
        attack = []
        for seed in range(5):
            rng = np.random.default_rng(seed)
            copied = rng.choice(len(table.y), size=len(table.y) // 3, replace=False)
            rows = table.rows + [table.rows[i] for i in copied]
            y = np.concatenate([table.y, table.y[copied] / 700.0])
            groups = np.concatenate([table.groups, table.groups[copied]])
            users = np.array(["victim"] * len(table.y) + ["attacker"] * len(copied))
            poisoned = replace(table, rows=rows, y=y, groups=groups, users=users,
                               report_times={k: np.concatenate([v, v[copied]]) for k, v in table.report_times.items()})
            attack.append(ratios(poisoned, inputs))
        print(f"{name} poisoned: attacker ratio {min(r['attacker'] for r in attack):.1f}-"
              f"{max(r['attacker'] for r in attack):.1f}, victim {min(r['victim'] for r in attack):.1f}-"
              f"{max(r['victim'] for r in attack):.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["lammps_melt", "gromacs_water"])
