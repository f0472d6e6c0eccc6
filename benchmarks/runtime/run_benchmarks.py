"""Runtime-model benchmarks (issue 6): accuracy, coverage, transfer, active learning, latency.

    nice -n 10 python benchmarks/runtime/run_benchmarks.py --out benchmarks/runtime/results.json \
        [--only latency accuracy coverage runtime_features transfer active_learning active_learning_synthetic served]
    python benchmarks/runtime/tables.py benchmarks/runtime/results.json      # markdown for the README
    python benchmarks/runtime/plot_results.py benchmarks/runtime/results.json benchmarks/runtime/active_learning.png

Datasets: tests/data/runtime/lammps_melt.csv (real LAMMPS runs, see SOURCES.md there),
lammps_melt_opt.csv (transfer target), and a synthetic power law generated here
(runtime = 0.01 n² m / p + 0.5, 3 % log-normal noise, two irrelevant inputs, 3 reps).
Every number is a mean over the seeds listed in the output.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.runtime import (ANNEnsemble, ExtraTreesRuntime, RuntimeModel, TransferRuntime,
                                           evaluate, mape, parse_runs_csv, pick_diverse, read_runs_csv,
                                           split_by_configuration, train_application)
from hpcpredict.daemon.runtime.inputs import extract_inputs
from hpcpredict.daemon.runtime.served import ApplicationModels

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "runtime"
LEARNERS = {
    "extra-trees": ("extra-trees", {}),
    "extra-trees (seed, no trend)": ("extra-trees", {"trend": "none"}),
    "ann k-fold ensemble": ("ann", {}),
    "linear": ("linear", {}),
}


def synthetic_power_law(seed: int = 0, n_configs: int = 150, reps: int = 3, scale: float = 1.0,
                        exponent: float = 1.0):
    rng = np.random.default_rng(seed)
    lines = ["n,m,p,noise_a,noise_b,rep,runtime"]
    for _ in range(n_configs):
        n, m, p = int(rng.integers(10, 60)), int(rng.integers(1, 20)), int(rng.choice([1, 2, 4, 8]))
        a, b = rng.uniform(0, 1), int(rng.integers(0, 100))
        value = scale * (0.01 * n * n * m / p + 0.5) ** exponent
        for rep in range(reps):
            lines.append(f"{n},{m},{p},{a:.4f},{b},{rep},{value * np.exp(rng.normal(0, 0.03)):.6f}")
    return parse_runs_csv("\n".join(lines), target="runtime")


def accuracy(tables: dict, seeds: list[int], fractions: list[float]) -> list[dict]:
    rows = []
    for dataset, table in tables.items():
        for label, (learner, params) in LEARNERS.items():
            for fraction in fractions:
                results = [evaluate(table, learner=learner, train_fraction=fraction, seed=s, params=params,
                                    time_share=None) for s in seeds]
                row = {"dataset": dataset, "learner": label, "train_fraction": fraction, "seeds": seeds,
                       "n_train": int(np.mean([r["n_train"] for r in results]))}
                for key in ("mape", "rank_accuracy", "coverage80", "coverage95", "interval_width80"):
                    row[key] = float(np.mean([r[key] for r in results]))
                row["features_kept"] = results[0]["features_kept"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def coverage_check(table, seeds: list[int]) -> list[dict]:
    """Interval coverage at 50 % training over many splits (one split's coverage is noisy)."""
    rows = []
    for label, (learner, params) in {"extra-trees (cross-conformal)": ("extra-trees", {}),
                                     "extra-trees (split conformal)": ("extra-trees", {"calibration": "split",
                                                                                       "calibration_folds": 4}),
                                     "ann k-fold ensemble": ("ann", {}),
                                     "linear": ("linear", {})}.items():
        results = [evaluate(table, learner=learner, train_fraction=0.5, seed=s, params=params, time_share=None)
                   for s in seeds]
        row = {"learner": label, "seeds": len(seeds)}
        for key in ("coverage80", "coverage95", "interval_width80", "mape"):
            values = [r[key] for r in results]
            row[key] = float(np.mean(values))
            row[key + "_std"] = float(np.std(values))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def runtime_features(table, seeds: list[int]) -> list[dict]:
    rows = []
    for share in (None, 0.05, 0.25):
        for learner in ("extra-trees", "ann"):
            results = [evaluate(table, learner=learner, train_fraction=0.5, seed=s, time_share=share) for s in seeds]
            row = {"time_share": share, "learner": learner,
                   "mape": float(np.mean([r["mape"] for r in results])),
                   "rank_accuracy": float(np.mean([r["rank_accuracy"] for r in results])),
                   "runtime_features_kept": results[0]["runtime_features_kept"],
                   "runtime_features_dropped": results[0]["runtime_features_dropped"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def transfer(source_table, target_table, seeds: list[int], shares=(0.05, 0.10), dataset: str = "") -> list[dict]:
    inputs = [name for name in source_table.inputs if name not in source_table.report_times]
    source = RuntimeModel("extra-trees", {"random_state": 0, "calibration_folds": 0}, inputs).fit(source_table)
    X = source.matrix(target_table.rows)
    y = target_table.y
    rows = []
    for share in shares:
        errors: dict[str, list[float]] = {}
        for seed in seeds:
            train, test = split_by_configuration(target_table.groups, share, seed)
            candidates = {
                "transfer h(f_s(x), x), ridge": TransferRuntime(source.estimator_, random_state=seed),
                "transfer h(f_s(x), x), extra-trees": TransferRuntime(source.estimator_, base="extra-trees",
                                                                      random_state=seed),
                "target alone, extra-trees": ExtraTreesRuntime(random_state=seed, calibration_folds=0),
                "target alone, extra-trees (seed, no trend)": ExtraTreesRuntime(random_state=seed, trend="none",
                                                                                calibration_folds=0),
            }
            for label, model in candidates.items():
                model.fit(X[train], y[train], groups=target_table.groups[train])
                errors.setdefault(label, []).append(mape(y[test], model.predict(X[test])))
            errors.setdefault("source model unchanged", []).append(mape(y[test], source.estimator_.predict(X[test])))
        for label, values in errors.items():
            row = {"dataset": dataset, "target_share": share, "model": label, "mape": float(np.mean(values)),
                   "n_target_runs": int(round(share * len(np.unique(target_table.groups))))}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def active_learning(table, seeds: list[int], start: int = 10, step: int = 5, budget: int = 70) -> dict:
    """Error vs number of runs: CoV + min-distance picks against random picks (ANN ensembles)."""
    inputs = [name for name in table.inputs if name not in table.report_times]
    model = RuntimeModel("linear", {}, inputs).fit(table)  # only to build the encoder
    X_all = model.matrix(table.rows)
    groups = table.groups
    configs = np.unique(groups)
    X = np.stack([X_all[groups == g][0] for g in configs])
    y = np.array([table.y[groups == g].mean() for g in configs])
    curves: dict[str, list[list[float]]] = {"active (CoV + min distance)": [], "random": []}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        order = rng.permutation(len(configs))
        test = order[: len(configs) * 3 // 10]
        pool = order[len(configs) * 3 // 10:]
        first = pool[:start]
        for strategy in curves:
            chosen = list(first)
            curve = []
            while True:
                ann = ANNEnsemble(n_members=5, random_state=seed).fit(X[chosen], y[chosen])
                curve.append(mape(y[test], ann.predict(X[test])))
                if len(chosen) >= budget:
                    break
                left = np.setdiff1d(pool, chosen)
                if strategy == "random":
                    chosen += list(rng.choice(left, step, replace=False))
                else:
                    cov = ann.coefficient_of_variation(X[left])
                    picks = pick_diverse(cov, ann.standardised_inputs(X[left]),
                                         done=ann.standardised_inputs(X[chosen]), k=step, min_distance=0.5)
                    chosen += [int(left[i]) for i in picks]
            curves[strategy].append(curve)
            print(strategy, seed, [round(c, 3) for c in curve], flush=True)
    runs = list(range(start, budget + 1, step))
    mean = {k: np.mean(np.array(v), axis=0).tolist() for k, v in curves.items()}
    random_final = mean["random"][-1]
    reach = next((r for r, e in zip(runs, mean["active (CoV + min distance)"]) if e <= random_final), None)
    return {"runs": runs, "mape": mean, "random_final_mape": random_final, "active_runs_to_reach": reach,
            "saving": None if reach is None else 1 - reach / runs[-1], "seeds": seeds}


def latency(data: Path) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        train_application(data, target="runtime_s", application="lmp", directory=Path(folder), time_share=0.25,
                          learners={"extra-trees": {}})
        models = ApplicationModels.load(Path(folder))
        script = ("#!/bin/bash\n#SBATCH -N 1\n#SBATCH -t 00:10:00\nmodule load lammps\nexport OMP_NUM_THREADS=1\n"
                  "srun lmp -nocite -var x 8 -var y 9 -var z 7 -var steps 300 -var cutoff 2.5 -var skin 0.3 "
                  "-var temp 1.5 -var newton on -in in.melt > out.log\n")
        n = 2000
        start = time.perf_counter()
        for _ in range(n):
            job = extract_inputs(script)
        extract_us = (time.perf_counter() - start) / n * 1e6
        start = time.perf_counter()
        for _ in range(n):
            estimate = models.estimate("lmp", job.inputs, nodes=1, ntasks=1, cpus_per_task=1)
        estimate_us = (time.perf_counter() - start) / n * 1e6
        # The same job through a served ANN ensemble (10 nets, all members in one numpy pass).
        train_application(data, target="runtime_s", application="lmp", directory=Path(folder) / "ann",
                          learners={"ann": {}})
        ann_models = ApplicationModels.load(Path(folder) / "ann")
        start = time.perf_counter()
        for _ in range(n):
            ann_estimate = ann_models.estimate("lmp", job.inputs, nodes=1, ntasks=1, cpus_per_task=1)
        estimate_ann_us = (time.perf_counter() - start) / n * 1e6
        table = read_runs_csv(data, target="runtime_s")
        inputs = [name for name in table.inputs if name not in table.report_times]
        fitted = RuntimeModel("extra-trees", {"random_state": 0, "calibration_folds": 0}, inputs).fit(table)
        x = fitted.matrix([job.inputs])
        z = fitted.estimator_.feature_terms(x)
        start = time.perf_counter()
        for _ in range(200):
            fitted.estimator_.forest_.predict(z)
        sklearn_us = (time.perf_counter() - start) / 200 * 1e6
    result = {"extract_inputs_us": extract_us, "estimate_us": estimate_us, "estimate_ann_us": estimate_ann_us,
              "estimate_ann_runtime_s": ann_estimate.runtime_s,
              "sklearn_forest_predict_one_row_us": sklearn_us, "estimate_runtime_s": estimate.runtime_s}
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    seeds = list(range(args.seeds))
    lammps = read_runs_csv(DATA / "lammps_melt.csv", target="runtime_s")
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results["machine"] = "2-core Debian 12 development VM (shared), LAMMPS 20220106 (Debian)"
    results["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    parts = args.only or ["latency", "accuracy", "coverage", "runtime_features", "transfer", "active_learning",
                          "active_learning_synthetic", "served"]
    for part in parts:
        started = time.time()
        if part == "latency":
            results[part] = latency(DATA / "lammps_melt.csv")
        elif part == "accuracy":
            results[part] = accuracy({"lammps_melt (real)": lammps, "power law (synthetic)": synthetic_power_law()},
                                     seeds, [0.1, 0.25, 0.5])
        elif part == "coverage":
            results[part] = coverage_check(lammps, list(range(10)))
        elif part == "runtime_features":
            results[part] = runtime_features(lammps, seeds)
        elif part == "transfer":
            target = read_runs_csv(DATA / "lammps_melt_opt.csv", target="runtime_s")
            results[part] = transfer(lammps, target, list(range(max(5, args.seeds))),
                                     dataset="LAMMPS -> LAMMPS -sf opt (real)")
            results[part] += transfer(synthetic_power_law(seed=7, reps=1),
                                      synthetic_power_law(seed=8, reps=1, scale=2.5, exponent=1.1),
                                      list(range(max(5, args.seeds))),
                                      dataset="synthetic: target = 2.5 * source^1.1")
        elif part == "active_learning":
            results[part] = active_learning(lammps, seeds)
        elif part == "served":
            from served import served_accuracy  # benchmarks/runtime/served.py (script directory on sys.path)

            results[part] = served_accuracy(DATA / "lammps_melt.csv", "runtime_s", seeds, label="lammps_melt (real)")
        elif part == "active_learning_synthetic":
            results[part] = active_learning(synthetic_power_law(seed=11, n_configs=300, reps=1), seeds)
        print(f"== {part}: {time.time() - started:.0f} s", flush=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
