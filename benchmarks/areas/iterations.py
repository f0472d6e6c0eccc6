"""Counts no input states: how much of the runtime error of an input-only model they explain.

CP2K (Quickstep, ``EPS_SCF 1e-6``) and NWChem (SCF / DFT) iterate to convergence, and LAMMPS
rebuilds its neighbour lists when atoms have moved far enough: each count is fixed per
configuration (deterministic: see SOURCES.md) but no input states it. The SCF counts were
recorded per configuration of the runtime area's sweeps by a probe pass of the sweep harness
(``tests/data/runtime/CODE_iterations.json``, ``benchmarks/runtime/record_iterations.py``);
LAMMPS's builds by the loaded sweep of the same configurations (``lammps_melt.csv``, column
``neigh_builds``). Per code (``CODES``), on the runtime area's splits
(``split_by_configuration(groups, fraction, seed)``, seeds 0 .. ``--seeds`` − 1, ``--fractions``):

* ``distribution``: configurations per count, overall and per categorical input;
  ``across_ranks``: whether configurations that differ only in their process count agree on it;
* ``predictability``: the count predicted from the inputs (the sweep's declared derived inputs
  included) by a random forest classifier, out-of-fold over the training configurations (5
  configuration folds) and, fitted on all of them, on the held-out configurations: accuracy and
  mean absolute error in iterations, against always answering the training configurations' majority;
* ``learners``: test MAPE and rank accuracy of log-linear, start-up + steps, boosted trees,
  extra-trees and ``auto`` (the cross-validated choice, as served), scored as the runtime area
  scores them (``evaluation.evaluate``, submit-time inputs), without the count and with it
  as one more input (``scf_iterations``, ``neigh_builds``: an oracle, a site does not know it at
  submission). With an SCF count, start-up + steps takes it as its number of steps
  (``steps="scf_iterations"``); otherwise it chooses its steps input as served;
* ``goal``: at each fraction, ``auto``'s MAPE over the runtime area's noise floor
  (``noise_floor``: repetition MAPE) without and with the count, whether it is within
  1.3x, and the share of the gap (MAPE − 1.3 × floor) that knowing the count closes.

* ``ceiling`` (``--leave-one-out``, instead of the splits): every configuration predicted by
  each of ``CEILING_LEARNERS`` fitted on all the others, without and with the count: the most
  training a sweep can give (a site with every other configuration of the sweep in its history),
  so what no split of the sweep can beat with these learners. MAPE over all held-out runs, over
  those whose inputs another configuration had (``seen``: the same input file run again, as the
  sweep drew some twice) and over the rest (``new``), against the floor.

    python -m benchmarks run iterations [--seeds 3] [--fractions 0.25,0.5] [--codes cp2k,nwchem,lammps] [--jobs 2]
    OMP_NUM_THREADS=1 python -m benchmarks run iterations --leave-one-out --codes cp2k --jobs 2 --out iterations_ceiling.json

Measured 2026-11-24 (results/iterations.json; the without-count scores equal the runtime area's):
at 50 % training, CP2K's served MAPE 4.8 % -> 3.8 % with the count (2.6x -> 2.1x its 1.8 % floor,
41 % of the gap to 1.3x closed; the count is predicted from the inputs for 83 % of held-out
configurations); NWChem's 7.0 % -> 9.0 % (its count, a function of molecules, basis and method,
is predicted for 97 % of held-out configurations: it is not what the inputs miss). LAMMPS
(``--codes lammps``, results/iterations_lammps.json): 4.9 % -> 4.65 % (1.84x -> 1.75x its 2.7 %
floor, 17 % of the gap; none at 25 % training).

The ceiling (``--leave-one-out --codes cp2k``, results/iterations_ceiling.json, 2026-11-26): each
CP2K configuration predicted from all 208 others, its 1.8 % floor: without the count boosted trees
3.7 % (2.07x; seen inputs 1.9 %, new 4.4 %), log-linear 5.8 %, Gaussian process 4.6 %; with it the
Gaussian process 2.6 % (1.47x; new 3.0 %), boosted trees 2.9 %. Not within 1.3x even so.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DESCRIPTION = ("per-configuration counts no input states (CP2K's and NWChem's SCF iterations, LAMMPS's "
               "neighbour-list builds): their distribution, predictability from the inputs, and the runtime "
               "learners' MAPE vs the noise floor with the count as an (oracle) input")

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "runtime"


@dataclass(frozen=True)
class Count:
    """A code's per-configuration count: the runtime area's sweep it is added to, where it was
    recorded, the input name it gets, and whether start-up + steps takes it as its step count."""
    sweep: str
    source: str
    name: str
    is_step_count: bool
    what: str


CODES = {
    "cp2k": Count("cp2k_water.csv", "cp2k_iterations.json", "scf_iterations", True, "SCF steps"),
    "nwchem": Count("nwchem_water.csv", "nwchem_iterations.json", "scf_iterations", True, "SCF iterations"),
    # LAMMPS's neighbour-list builds (its log's "Neighbor list builds"), recorded by the loaded
    # sweep of the same 180 configurations (``lammps_melt.csv``: every repetition agrees).
    "lammps": Count("lammps_melt_quiet.csv", "lammps_melt.csv", "neigh_builds", False, "neighbour-list builds"),
}
GOAL_FACTOR = 1.3
LEARNERS = ("log-linear", "startup-steps", "boosted-trees", "extra-trees")
CEILING_LEARNERS = ("log-linear", "boosted-trees", "gaussian-process")


def read_counts(name: str) -> dict[str, int]:
    """config -> the count: the probe's JSON, or a sweep CSV's column (one value per configuration)."""
    count = CODES[name]
    path = DATA / count.source
    if path.suffix == ".json":
        return {config: int(value) for config, value in json.loads(path.read_text())["iterations"].items()}
    found: dict[str, int] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            value = int(float(row[count.name]))
            if found.setdefault(row["config"], value) != value:
                raise SystemExit(f"{path}: configuration {row['config']} has different {count.name} in different runs")
    return found


def tables(name: str):
    """(table without the count, table with it as one more input): the runtime area's table (the
    CSV and its declared derived inputs) and the same runs with the count added."""
    from hpcpredict.daemon.lab.runtime import declared_derived, parse_runs_csv

    count = CODES[name]
    path = DATA / count.sweep
    counts = read_counts(name)
    text = path.read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    missing = sorted({row["config"] for row in rows} - set(counts), key=int)
    if missing:
        raise SystemExit(f"{name}: no count for configurations {missing}")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]) + [count.name])
    writer.writeheader()
    writer.writerows(dict(row, **{count.name: counts[row["config"]]}) for row in rows)
    derived = declared_derived(path)
    without = parse_runs_csv(text, target="runtime_s", source=str(path), derived=derived)
    with_count = parse_runs_csv(out.getvalue(), target="runtime_s", source=str(path), derived=derived)
    assert np.array_equal(without.groups, with_count.groups)   # the same configurations, so the same splits
    return without, with_count


def per_configuration(table, count: str) -> tuple[np.ndarray, list[dict], np.ndarray]:
    """(group ids, each configuration's inputs without the input ``count``, each configuration's count)."""
    groups, first = np.unique(table.groups, return_index=True)
    rows = [table.rows[i] for i in first]
    return groups, [{k: v for k, v in row.items() if k != count} for row in rows], np.array([int(row[count]) for row in rows])


def distribution(table, count: str) -> dict:
    _, rows, counts = per_configuration(table, count)
    out = {"all": dict(sorted(Counter(counts.tolist()).items()))}
    for name in table.inputs:
        values = [row.get(name) for row in rows]
        if name != count and (all(isinstance(v, str) for v in values) or name in ("ranks", "n_water")):
            out[f"by_{name}"] = {str(value): dict(sorted(Counter(counts[[v == value for v in values]].tolist()).items()))
                                 for value in sorted(set(values), key=str)}
    return out


def across_ranks(table, count_name: str) -> dict | None:
    """Whether the count follows the chemistry alone: configurations whose inputs differ only in
    ``ranks`` (and the derived inputs), grouped, and how many groups agree on one count (None:
    the code has no ``ranks`` input)."""
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    if "ranks" not in table.inputs:
        return None
    _, rows, counts = per_configuration(table, count_name)
    derived = set(table.derived.names) if isinstance(table.derived, DerivedInputs) else set()
    by_chemistry: dict[tuple, set] = {}
    for row, count in zip(rows, counts.tolist()):
        key = tuple(sorted((k, str(v)) for k, v in row.items() if k != "ranks" and k not in derived))
        by_chemistry.setdefault(key, set()).add((row.get("ranks"), count))
    both = [values for values in by_chemistry.values() if len({ranks for ranks, _ in values}) > 1]
    return {"chemistries": len(by_chemistry), "run_with_both_rank_counts": len(both),
            "same_count_for_both": sum(1 for values in both if len({count for _, count in values}) == 1)}


def _encode(rows: list[dict]):
    import pandas as pd

    return pd.get_dummies(pd.DataFrame(rows), dtype=float).fillna(0.0)


def predictability(table, count: str, fraction: float, seeds: int) -> dict:
    """The count predicted from the inputs: out-of-fold on the training configurations and on
    the held-out ones, vs the training majority."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import KFold

    from hpcpredict.daemon.lab.runtime import split_by_configuration

    groups, rows, counts = per_configuration(table, count)
    X = _encode(rows).to_numpy()
    scores = {"oof_accuracy": [], "oof_mae": [], "oof_majority_accuracy": [], "oof_majority_mae": [],
              "test_accuracy": [], "test_mae": [], "test_majority_accuracy": [], "test_majority_mae": []}

    def score(prefix, train, test, seed):
        model = RandomForestClassifier(n_estimators=200, random_state=seed).fit(X[train], counts[train])
        predicted = model.predict(X[test])
        majority = Counter(counts[train].tolist()).most_common(1)[0][0]
        return {f"{prefix}_accuracy": float(np.mean(predicted == counts[test])),
                f"{prefix}_mae": float(np.mean(np.abs(predicted - counts[test]))),
                f"{prefix}_majority_accuracy": float(np.mean(counts[test] == majority)),
                f"{prefix}_majority_mae": float(np.mean(np.abs(counts[test] - majority)))}

    for seed in range(seeds):
        train_runs, _ = split_by_configuration(table.groups, fraction, seed)
        in_train = np.isin(groups, table.groups[train_runs])
        train, test = np.nonzero(in_train)[0], np.nonzero(~in_train)[0]
        oof = {key: [] for key in ("oof_accuracy", "oof_mae", "oof_majority_accuracy", "oof_majority_mae")}
        weights = []
        for fold_train, fold_test in KFold(5, shuffle=True, random_state=seed).split(train):
            for key, value in score("oof", train[fold_train], train[fold_test], seed).items():
                oof[key].append(value)
            weights.append(fold_test.size)
        for key, values in oof.items():
            scores[key].append(float(np.average(values, weights=weights)))
        for key, value in score("test", train, test, seed).items():
            scores[key].append(value)
    return {key: float(np.mean(values)) for key, values in scores.items()}


def learner_scores(table, fraction: float, seeds: int, with_count: Count | None) -> dict:
    """Each learner's and ``auto``'s test scores; ``with_count``: the count the table holds, which
    start-up + steps then takes as its step count if it is one."""
    from hpcpredict.daemon.lab.runtime import evaluate, select_learner, split_by_configuration, usable_inputs

    per_learner: dict[str, list[dict]] = {learner: [] for learner in LEARNERS}
    auto, chosen = [], Counter()
    count_is_steps = with_count is not None and with_count.is_step_count
    for seed in range(seeds):
        train, test = split_by_configuration(table.groups, fraction, seed)
        common = dict(train_rows=train, test_rows=test, seed=seed, train_fraction=fraction, time_share=None)
        results = {}
        for learner in LEARNERS:
            params = {"steps": with_count.name} if count_is_steps and learner == "startup-steps" else None
            results[learner] = evaluate(table, learner=learner, params=params, **common)
            per_learner[learner].append(results[learner])
        # auto as the runtime area scores it: the served choice fits exactly that learner's model.
        inputs, _, _ = usable_inputs(table, train, time_share=None)
        pick, _ = select_learner(table, train, inputs=inputs, seed=seed)
        chosen[pick] += 1
        if pick not in results or (count_is_steps and pick == "startup-steps"):
            results[pick] = evaluate(table, learner=pick, **common)
        auto.append(results[pick])
    out = {learner: {key: float(np.mean([r[key] for r in runs])) for key in ("mape", "rank_accuracy")}
           for learner, runs in per_learner.items()}
    out["auto"] = {key: float(np.mean([r[key] for r in auto])) for key in ("mape", "rank_accuracy")}
    out["auto"]["chosen"] = dict(chosen)
    out["auto"]["mape_by_split"] = [r["mape"] for r in auto]
    return out


def learner_task(name: str, fraction: float, seeds: int, with_count: bool) -> dict:
    """One code's learners at one fraction, without or with the count (a process of ``--jobs``)."""
    without, with_count_table = tables(name)
    return learner_scores(with_count_table if with_count else without, fraction, seeds,
                          with_count=CODES[name] if with_count else None)


def leave_one_out(name: str, learner: str, with_count: bool) -> dict:
    """MAPE of every configuration predicted by ``learner`` fitted on all the other configurations
    (point predictions: fitted without interval calibration, as cross-validation fits), over all
    runs and split by whether another configuration had the same inputs (the count aside)."""
    from benchmarks.areas.runtime import input_keys
    from hpcpredict.daemon.lab.runtime import CANDIDATES, RuntimeModel, mape, without_calibration

    without, with_count_table = tables(name)
    table = with_count_table if with_count else without
    key = input_keys(table, without.inputs)
    params = dict(without_calibration(learner, CANDIDATES[learner]), random_state=0)
    predicted, seen = np.empty(table.y.size), np.zeros(table.y.size, dtype=bool)
    for group in np.unique(table.groups):
        held_out, train = np.nonzero(table.groups == group)[0], np.nonzero(table.groups != group)[0]
        model = RuntimeModel(learner, params, table.inputs).fit(table, train)
        predicted[held_out] = model.predict([table.rows[i] for i in held_out])
        others = {key[i] for i in train}
        seen[held_out] = [key[i] in others for i in held_out]
    return {"mape": mape(table.y, predicted), "seen_share": float(seen.mean()),
            "mape_seen": mape(table.y[seen], predicted[seen]) if seen.any() else None,
            "mape_new": mape(table.y[~seen], predicted[~seen]) if (~seen).any() else None}


def run_tasks(function, tasks: list[tuple], jobs: int) -> dict:
    """{task: function(*task)}, in up to ``jobs`` processes."""
    if jobs <= 1:
        return {task: function(*task) for task in tasks}
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {task: pool.submit(function, *task) for task in tasks}
        return {task: future.result() for task, future in futures.items()}


def ceiling(codes: list[str], jobs: int) -> dict:
    """:func:`leave_one_out` of every code, learner, without and with the count."""
    from benchmarks.areas.runtime import noise_floor

    tasks = [(code, learner, with_count) for code in codes for learner in CEILING_LEARNERS
             for with_count in (False, True)]
    scores = run_tasks(leave_one_out, tasks, jobs)
    out = {}
    for code in codes:
        without, _ = tables(code)
        floor = noise_floor(without)["repetition_mape"]
        by = {part: {learner: dict(scores[(code, learner, with_count)],
                                   over_floor=scores[(code, learner, with_count)]["mape"] / floor)
                     for learner in CEILING_LEARNERS}
              for part, with_count in (("without_count", False), ("with_count", True))}
        best = {part: min(results, key=lambda learner: results[learner]["mape"]) for part, results in by.items()}
        out[code] = {"configurations": int(np.unique(without.groups).size), "noise_floor_repetition_mape": floor,
                     "goal_mape": GOAL_FACTOR * floor, **by,
                     "best": {part: {"learner": learner, "mape": by[part][learner]["mape"],
                                     "over_floor": by[part][learner]["over_floor"],
                                     "within_1.3x": bool(by[part][learner]["mape"] <= GOAL_FACTOR * floor)}
                              for part, learner in best.items()}}
    return out


def evaluate_code(name: str, fractions: list[float], seeds: int, scores: dict) -> dict:
    """The code's results; ``scores[(fraction, with_count)]``: :func:`learner_task`'s."""
    from benchmarks.areas.runtime import noise_floor

    without, with_count = tables(name)
    floor = noise_floor(without)["repetition_mape"]
    out = {"data": [f"tests/data/runtime/{file}" for file in (CODES[name].sweep, CODES[name].source)],
           "configurations": int(np.unique(without.groups).size), "runs": int(without.y.size),
           "noise_floor_repetition_mape": floor, "count": CODES[name].what, "count_input": CODES[name].name,
           "distribution": distribution(with_count, CODES[name].name),
           "across_ranks": across_ranks(with_count, CODES[name].name),
           "by_fraction": {}}
    for fraction in fractions:
        row = {"predictability": predictability(with_count, CODES[name].name, fraction, seeds),
               "without_count": scores[(fraction, False)], "with_count": scores[(fraction, True)]}
        before, after = row["without_count"]["auto"]["mape"], row["with_count"]["auto"]["mape"]
        gap = before - GOAL_FACTOR * floor
        row["goal"] = {"auto_mape_over_floor_without": before / floor, "auto_mape_over_floor_with": after / floor,
                       "within_1.3x_without": bool(before <= GOAL_FACTOR * floor),
                       "within_1.3x_with": bool(after <= GOAL_FACTOR * floor),
                       "gap_without": gap, "gap_with": after - GOAL_FACTOR * floor,
                       "share_of_gap_closed": (before - after) / gap if gap > 0 else None,
                       "best_learner_with": min(LEARNERS, key=lambda learner: row["with_count"][learner]["mape"]),
                       "best_mape_over_floor_with": min(row["with_count"][learner]["mape"] for learner in LEARNERS)
                       / floor}
        out["by_fraction"][str(fraction)] = row
    return out


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run iterations", description=DESCRIPTION)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--fractions", default="0.25,0.5")
    parser.add_argument("--codes", default=",".join(CODES))
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes: each scores one (code, fraction, with or without the count)")
    parser.add_argument("--leave-one-out", action="store_true",
                        help="instead of the splits: each configuration predicted from all the others (the ceiling)")
    options = parser.parse_args(args)
    fractions = [float(f) for f in options.fractions.split(",")]
    from benchmarks.areas.runtime import chosen_codes

    codes = chosen_codes(options.codes, CODES)
    if options.leave_one_out:
        codes_out = ceiling(codes, options.jobs)
        return {"target": "runtime_s (CPU seconds)", "learners": list(CEILING_LEARNERS),
                "goal": f"MAPE within {GOAL_FACTOR}x the repetition MAPE", "ceiling": codes_out,
                "headline": {code: {part: out["best"][part] for part in ("without_count", "with_count")}
                             for code, out in codes_out.items()}}
    results = {"seeds": options.seeds, "fractions": fractions, "target": "runtime_s (CPU seconds)",
               "goal": f"auto's MAPE within {GOAL_FACTOR}x the repetition MAPE", "codes": {}}
    # The heaviest first (CP2K's table is the larger, the larger fraction costs more), so the pool stays busy.
    tasks = [(code, fraction, with_count) for code in codes for fraction in sorted(fractions, reverse=True)
             for with_count in (False, True)]
    scores = run_tasks(learner_task, [(code, fraction, options.seeds, with_count)
                                       for code, fraction, with_count in tasks], options.jobs)
    scores = {(code, fraction, with_count): score for (code, fraction, _, with_count), score in scores.items()}
    for code in codes:
        results["codes"][code] = evaluate_code(code, fractions, options.seeds,
                                               {(f, w): scores[(c, f, w)] for c, f, w in tasks if c == code})
    results["headline"] = {
        code: {fraction: {"floor": out["noise_floor_repetition_mape"],
                          "auto_mape_without": row["without_count"]["auto"]["mape"],
                          "auto_mape_with": row["with_count"]["auto"]["mape"],
                          "over_floor_without": row["goal"]["auto_mape_over_floor_without"],
                          "over_floor_with": row["goal"]["auto_mape_over_floor_with"],
                          "share_of_gap_closed": row["goal"]["share_of_gap_closed"],
                          "count_test_accuracy": row["predictability"]["test_accuracy"],
                          "count_majority_accuracy": row["predictability"]["test_majority_accuracy"]}
               for fraction, row in out["by_fraction"].items()}
        for code, out in results["codes"].items()}
    return results
