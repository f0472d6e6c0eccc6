"""The start-up + steps learner on the codes with a steps input: training-half CV, and what it recovers.

For GROMACS (with its declared ``pme_grid`` and without any derived input) and LAMMPS, at each
``--fractions`` training share, the configuration-grouped 5-fold cross-validated MAPE on the
TRAINING configurations of ``--seeds`` splits of ``benchmarks run runtime``
(``benchmarks/runtime/derived_check.py``'s ``training_cv``: the held-out halves are never looked
at) of each ``--learners``. Then the GROMACS model fitted on all runs, asked for nsteps = 0 (its
start-up) per PME grid and rank count, beside the start-up measured by ``mdrun -nsteps 0``
(``applications.gromacs.STARTUP_CPU_S``), and the fit's CPU time.

    python -m benchmarks run startup_steps [--fractions 0.5,0.25] [--seeds 6] [--learners log-linear,startup-steps]
"""
from __future__ import annotations

import argparse
import json
import time

DESCRIPTION = ("start-up + steps learner: training-half CV MAPE on GROMACS (with/without pme_grid) and LAMMPS, "
               "and the GROMACS start-up it recovers vs the measured one")

BOXES = {24: 2.8, 25: 2.95, 28: 3.3, 32: 3.6}   # a box whose PME grid is each edge the sweep picks


def recovered_startup() -> dict:
    from benchmarks.runtime.residuals import DATA
    from hpcpredict.daemon.lab.runtime.applications.gromacs import STARTUP_CPU_S
    from hpcpredict.daemon.lab.runtime import RuntimeModel, read_runs_csv
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    path = DATA / "gromacs_water.csv"
    declared = json.loads(path.with_suffix(".json").read_text())["derived_inputs"]
    table = read_runs_csv(path, target="runtime_s", derived=DerivedInputs([tuple(pair) for pair in declared]))
    start = time.process_time()
    model = RuntimeModel("startup-steps", {"random_state": 0}).fit(table)
    fit_cpu_s = time.process_time() - start
    rows = {}
    for ranks, measured in STARTUP_CPU_S.items():
        for grid, box in [(0, 3.0)] + list(BOXES.items()):
            job = {"box_nm": box, "nsteps": 0, "rc_nm": 1.0, "coulomb": "pme" if grid else "rf", "ranks": float(ranks)}
            rows[f"{ranks} ranks, grid {grid or 'rf'}"] = {"learned_s": round(float(model.predict([job])[0]), 3),
                                                          "measured_s": measured[grid]}
    return {"fit_cpu_s_with_calibration": round(fit_cpu_s, 3), "runs": int(len(table.y)),
            "penalty": model.estimator_.penalty_, "steps_input": model.estimator_.steps_name_, "startup": rows}


def run(args: list[str]) -> dict:
    from benchmarks.runtime.derived_check import training_cv
    from benchmarks.runtime.residuals import DATA

    parser = argparse.ArgumentParser(prog="benchmarks run startup_steps", description=DESCRIPTION)
    parser.add_argument("--fractions", default="0.5,0.25")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--learners", default="log-linear,startup-steps")
    options = parser.parse_args(args)
    learners = [name for name in options.learners.split(",") if name]
    gromacs = [tuple(pair) for pair in json.loads((DATA / "gromacs_water.json").read_text())["derived_inputs"]]
    cases = {"gromacs without derived inputs": ("gromacs", []), "gromacs with pme_grid": ("gromacs", gromacs),
             "lammps": ("lammps", [])}
    cv = {}
    for fraction in (float(f) for f in options.fractions.split(",")):
        for label, (code, declarations) in cases.items():
            scores = training_cv(code, declarations, learners, fraction, options.seeds)
            cv[f"{label}, {fraction:.0%} training"] = scores   # per learner: MAPE and rank accuracy
    return {"training_half_cv": cv, "seeds": options.seeds, "gromacs_startup_recovered": recovered_startup()}
