"""Runtime from inputs, per real code: accuracy of the served model against each code's noise floor.

For every recorded sweep of a real code (tests/data/runtime/: LAMMPS, GROMACS, CP2K, NWChem;
see SOURCES.md there), at 10, 25 and 50 % of the configurations used for training (the rest
held out, all repetitions of a configuration on one side), over ``--seeds`` random splits:

* every servable learner forced (``hpcpredict evaluate runtime --learner L``; the blend of
  log-linear, boosted trees and ANN included) and ``auto``
  (``train-runtime``'s own choice: cross-validation on the training runs only, so the choice is
  nested inside the evaluation split), each scored as served: the fitted model is written as an
  artifact, loaded as the daemon loads it and asked one held-out run at a time;
* MAPE, rank accuracy (pairs of held-out runs ordered right), coverage of the 80 % and 95 %
  intervals;
* at 50 % training and above, the served ``auto`` model's MAPE on the held-out runs of each
  process count (``ranks``) and on those whose inputs a training run had or not, and the noise
  floor per process count (``--fractions 0.75,0.9``: how the error falls with more training);
* derived inputs: the sweep declares quantities its code's cost follows (``DERIVED`` in
  ``daemon/lab/runtime/applications/CODE.py``, recorded as ``derived_inputs`` in the JSON beside the CSV);
  they are computed from the inputs as ``train-runtime --derive`` does (``--no-derived``: without);
* the code's repetition noise, the floor: ``repetition_mape`` (each run predicted by the mean
  of its configuration's other repetitions: the MAPE of a perfect model of the inputs) and the
  median relative spread (max − min) / median of a configuration's repetitions, and
  ``repetition_rank_accuracy`` (the same predictor's rank accuracy: roughly the ceiling the noise
  leaves, a little pessimistic since its prediction, the mean of 1-2 other runs, is noisy too).

``auto`` fits exactly the model of the learner it chooses with the same seed, so its scores
are that learner's scores on the split; the first split of every code also runs the full
``auto`` evaluation and checks that the two agree (``auto_shortcut_checked``).

    python -m benchmarks run runtime [--seeds 3] [--first-seed 0] [--codes lammps,gromacs,cp2k,nwchem] [--fractions 0.1,0.25,0.5] [--jobs 4] [--no-derived]

``--first-seed S`` scores splits S .. S + seeds − 1 instead of 0 .. seeds − 1: the published
results use splits from 0 (``runtime_coverage`` too), so changes to the learners or to the
choice are developed on splits from 100. ``--jobs N`` evaluates up to N codes at once in
separate processes (the results are the same).
One split's 80 % coverage strays from the mean by up to 0.1 (``coverage80_by_split``): the
``runtime_coverage`` area measures the intervals' coverage over more splits.
"""
from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.runtime import declared_derived

DESCRIPTION = ("runtime from inputs on real codes (LAMMPS, GROMACS, CP2K, NWChem): MAPE, rank accuracy, "
               "coverage at 10/25/50 % training vs each code's repetition noise; auto vs every learner")

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "runtime"
CODES = {"lammps": "lammps_melt_quiet.csv", "gromacs": "gromacs_water.csv", "cp2k": "cp2k_water.csv",
         "nwchem": "nwchem_water.csv"}
METRICS = ("mape", "rank_accuracy", "coverage80", "coverage95")


def repetition_rank_accuracy(groups: np.ndarray, y: np.ndarray) -> float | None:
    """Rank accuracy of each run predicted by the mean of its configuration's other repetitions:
    what a perfect model of the inputs would score, given the noise (pairs of configurations whose
    runtimes differ by less than the noise are ordered by a coin toss)."""
    from hpcpredict.daemon.lab.runtime import rank_accuracy

    _, index = np.unique(groups, return_inverse=True)
    counts, sums = np.bincount(index), np.bincount(index, weights=y)
    repeated = counts[index] > 1
    if repeated.sum() < 2:
        return None
    others = (sums[index] - y)[repeated] / (counts[index][repeated] - 1)
    return rank_accuracy(y[repeated], others)


def noise_floor(table) -> dict:
    from hpcpredict.daemon.lab.runtime import repetition_disagreement

    spreads, reps = [], Counter(table.groups.tolist())
    for group in np.unique(table.groups):
        y = table.y[table.groups == group]
        if y.size > 1:
            spreads.append((y.max() - y.min()) / np.median(y))
    floor = {"repetition_mape": repetition_disagreement(table.groups, table.y),
             "repetition_rank_accuracy": repetition_rank_accuracy(table.groups, table.y),
             "median_relative_spread": float(np.median(spreads)) if spreads else None,
             "configurations_with_3_reps": sum(1 for n in reps.values() if n >= 3)}
    if "ranks" in table.inputs:  # busy-waiting ranks on a shared machine: the floor per process count
        ranks = np.array([row.get("ranks") for row in table.rows])
        floor["repetition_mape_by_ranks"] = {
            str(int(value)): repetition_disagreement(table.groups[ranks == value], table.y[ranks == value])
            for value in sorted(set(ranks.tolist()))}
    return floor


def input_keys(table, inputs=None) -> list[tuple]:
    """Each run's ``inputs`` (default: the table's) as a hashable key: runs of the same input file."""
    names = table.inputs if inputs is None else inputs
    return [tuple(repr(row.get(name)) for name in names) for row in table.rows]


def auto_mape_by_part(table, train, test, seed: int) -> dict:
    """MAPE of the served ``auto`` model on parts of the held-out runs: each process count, and
    runs whose inputs some training run had (``seen_inputs``: the same input file run again)
    against inputs the training half never ran (``new_inputs``).

    The repetition floor is the error of predicting a run from runs of the same inputs; only the
    seen-inputs part faces that alone, the new-inputs part also what the inputs don't state."""
    from hpcpredict.daemon.lab.runtime import fit_served, mape, served_predictions, usable_inputs

    inputs, _, _ = usable_inputs(table, train, time_share=None)
    model, _ = fit_served(table, train, inputs=inputs, seed=seed)
    rows = [table.rows[i] for i in test]
    predicted = served_predictions(model, rows)[0]
    y = table.y[test]
    part = {}
    if "ranks" in table.inputs:
        ranks = np.array([row["ranks"] for row in rows])
        part["by_ranks"] = {str(int(r)): mape(y[ranks == r], predicted[ranks == r]) for r in sorted(set(ranks.tolist()))}
    key = input_keys(table)
    trained = {key[i] for i in train}
    seen = np.array([key[i] in trained for i in test])
    part["seen_inputs_share"] = float(seen.mean())
    part["seen_inputs"] = mape(y[seen], predicted[seen]) if seen.any() else None
    part["new_inputs"] = mape(y[~seen], predicted[~seen]) if (~seen).any() else None
    return part


def _mean(results: list[dict]) -> dict:
    return {key: float(np.mean([r[key] for r in results])) for key in METRICS}


def evaluate_code(name: str, path: Path, fractions: list[float], seeds: int, derived: bool = True,
                  first_seed: int = 0) -> dict:
    from hpcpredict.daemon.lab.runtime import (CANDIDATES, LearnerNotApplicable, evaluate, read_runs_csv,
                                               select_learner, split_by_configuration, usable_inputs)

    declared = declared_derived(path) if derived else None
    table = read_runs_csv(path, target="runtime_s", derived=declared)
    out = {"data": str(path.relative_to(DATA.parents[2])), "runs": int(table.y.size),
           "configurations": int(np.unique(table.groups).size), "inputs": table.inputs,
           "derived_inputs": declared.to_json() if declared else [],
           "noise": noise_floor(table), "by_fraction": {}}
    checked = False
    for fraction in fractions:
        per_learner = {learner: [] for learner in CANDIDATES}
        auto, chosen, parts = [], Counter(), []
        for seed in range(first_seed, first_seed + seeds):
            train, test = split_by_configuration(table.groups, fraction, seed)
            common = dict(train_rows=train, test_rows=test, seed=seed, train_fraction=fraction, time_share=None)
            for learner in CANDIDATES:
                try:
                    per_learner[learner].append(evaluate(table, learner=learner, **common))
                except LearnerNotApplicable:   # the Gaussian process with too few configurations
                    per_learner[learner].append(None)
            inputs, _, _ = usable_inputs(table, train, time_share=None)
            pick, _ = select_learner(table, train, inputs=inputs, seed=seed)
            chosen[pick] += 1
            auto.append(per_learner[pick][-1])
            if fraction >= 0.5:   # half or more: seen inputs are common enough to score apart
                parts.append(auto_mape_by_part(table, train, test, seed))
            if not checked:
                full = evaluate(table, learner="auto", **common)
                checked = full["learner"] == pick and all(
                    math.isclose(full[k], auto[-1][k], rel_tol=1e-9, abs_tol=1e-12) for k in METRICS)
                out["auto_shortcut_checked"] = checked
                out["example_selection"] = {"fraction": fraction, "seed": seed, **full["selection"],
                                            "cv_mape": full["cv_mape"]}
        row = {learner: None if None in results else _mean(results) for learner, results in per_learner.items()}
        fitted = [learner for learner in CANDIDATES if row[learner] is not None]
        # The 80 % coverage of each split: how far one split's coverage strays from the mean.
        row["auto"] = dict(_mean(auto), chosen=dict(chosen), coverage80_by_split=[r["coverage80"] for r in auto])
        if parts:
            if "by_ranks" in parts[0]:
                row["auto"]["mape_by_ranks"] = {r: float(np.mean([p["by_ranks"][r] for p in parts]))
                                                for r in parts[0]["by_ranks"]}
            row["auto"]["seen_inputs_share"] = float(np.mean([p["seen_inputs_share"] for p in parts]))
            for name in ("seen_inputs", "new_inputs"):   # mean over the splits that have such runs
                values = [p[name] for p in parts if p[name] is not None]
                row["auto"][f"mape_{name}"] = float(np.mean(values)) if values else None
        # "Single": one learner, not the blend of several (the blend is a candidate like the others).
        best = min((learner for learner in fitted if learner != "blend"), key=lambda learner: row[learner]["mape"])
        row["best_single"] = best
        row["auto_vs_best_single"] = row["auto"]["mape"] / row[best]["mape"]
        best_candidate = min(fitted, key=lambda learner: row[learner]["mape"])
        row["best_candidate"] = best_candidate
        row["auto_vs_best_candidate"] = row["auto"]["mape"] / row[best_candidate]["mape"]
        row["n_train_configurations"] = int(np.unique(table.groups[train]).size)
        out["by_fraction"][str(fraction)] = row
    half = out["by_fraction"].get("0.5")
    if half:
        noise = out["noise"]["repetition_mape"] or float("nan")
        a = half["auto"]
        out["goals_at_50"] = {
            "mape_over_noise": a["mape"] / noise,
            "mape_within_1.3x_noise": bool(a["mape"] <= 1.3 * noise),
            "mape_at_most_10pct": bool(a["mape"] <= 0.10),
            "rank_accuracy_at_least_0.93": bool(a["rank_accuracy"] >= 0.93),
            "coverage80_in_0.77_0.83": bool(0.77 <= a["coverage80"] <= 0.83),
            "auto_within_10pct_of_best_single": bool(half["auto_vs_best_single"] <= 1.10),
            "auto_within_10pct_of_best_learner": bool(half["auto_vs_best_candidate"] <= 1.10),   # the blend too
        }
    return out


def chosen_codes(option: str, known) -> list[str]:
    """The codes a ``--codes`` option names (comma-separated); unknown ones end the run with their names."""
    codes = [code for code in option.split(",") if code]
    unknown = sorted(set(codes) - set(known))
    if unknown:
        raise SystemExit(f"unknown codes: {', '.join(unknown)} (known: {', '.join(known)})")
    return codes


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run runtime", description=DESCRIPTION)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--codes", default=",".join(CODES))
    parser.add_argument("--fractions", default="0.1,0.25,0.5")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="split seeds first-seed .. first-seed + seeds - 1 (develop on splits >= 100)")
    parser.add_argument("--jobs", type=int, default=1, help="codes evaluated at once (processes)")
    parser.add_argument("--no-derived", action="store_true", help="ignore the sweeps' declared derived inputs")
    options = parser.parse_args(args)
    fractions = [float(f) for f in options.fractions.split(",")]
    codes = chosen_codes(options.codes, CODES)
    results = {"seeds": options.seeds, "first_seed": options.first_seed, "fractions": fractions,
               "target": "runtime_s (CPU seconds)",
               "inputs": "submission-time inputs only (no runtime features)"
                         + ("" if options.no_derived else ", plus the sweeps' declared derived inputs"),
               "codes": {}}
    if options.jobs > 1 and len(codes) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(options.jobs, len(codes))) as pool:
            futures = {code: pool.submit(evaluate_code, code, DATA / CODES[code], fractions, options.seeds,
                                         not options.no_derived, options.first_seed)
                       for code in codes}
            results["codes"] = {code: future.result() for code, future in futures.items()}
    else:
        for code in codes:
            results["codes"][code] = evaluate_code(code, DATA / CODES[code], fractions, options.seeds,
                                                   not options.no_derived, options.first_seed)
    return results
