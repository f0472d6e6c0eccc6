"""Coverage of the served runtime intervals over many splits: is the conformal interval calibrated?

The ``runtime`` area averages 3 random splits; one split's 80 % coverage strays from the mean
by up to 0.1 (its ~100 held-out configurations share their errors across repetitions), so 3
splits cannot tell 0.83 from 0.80. Here, for each real code at ``--fraction`` training, the
learners ``auto`` serves most (log-linear, boosted trees; ``--learners`` for others) are
scored as served (``evaluation.evaluate``: artifact written, loaded, asked one run at a time)
on ``--splits`` splits, and the mean 80 % / 95 % coverage is reported with its standard error
over splits and every split's value. Conformal intervals promise coverage ≥ nominal on
average over splits (see ``daemon/runtime/conformal.py``), not on each split.

    python -m benchmarks run runtime_coverage [--splits 10] [--fraction 0.5] [--learners log-linear,boosted-trees] [--jobs 4]
"""
from __future__ import annotations

import argparse

import numpy as np

from hpcpredict.daemon.lab.runtime import declared_derived

from .runtime import CODES, DATA

DESCRIPTION = ("runtime intervals on real codes: 80/95 % coverage of the served log-linear and boosted-trees "
               "models over many splits (mean ± standard error)")


def coverage_of_code(code: str, learners: list[str], fraction: float, splits: int) -> dict:
    from hpcpredict.daemon.lab.runtime import evaluate, read_runs_csv, split_by_configuration

    path = DATA / CODES[code]
    table = read_runs_csv(path, target="runtime_s", derived=declared_derived(path))
    out = {}
    for learner in learners:
        results = []
        for seed in range(splits):
            train, test = split_by_configuration(table.groups, fraction, seed)
            results.append(evaluate(table, learner=learner, train_rows=train, test_rows=test, seed=seed,
                                    train_fraction=fraction, time_share=None))
        row = {}
        for key in ("coverage80", "coverage95", "mape"):
            values = np.array([r[key] for r in results])
            row[key] = float(values.mean())
            row[f"{key}_standard_error"] = float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else None
            row[f"{key}_by_split"] = values.round(4).tolist()
        out[learner] = row
    return out


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run runtime_coverage", description=DESCRIPTION)
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--codes", default=",".join(CODES))
    parser.add_argument("--learners", default="log-linear,boosted-trees")
    parser.add_argument("--jobs", type=int, default=1, help="codes evaluated at once (processes)")
    options = parser.parse_args(args)
    codes = [c for c in options.codes.split(",") if c]
    unknown = sorted(set(codes) - set(CODES))
    if unknown:
        raise SystemExit(f"unknown codes: {', '.join(unknown)} (known: {', '.join(CODES)})")
    learners = [name for name in options.learners.split(",") if name]
    results = {"splits": options.splits, "fraction": options.fraction, "learners": learners, "codes": {}}
    if options.jobs > 1 and len(codes) > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(options.jobs, len(codes))) as pool:
            futures = {code: pool.submit(coverage_of_code, code, learners, options.fraction, options.splits)
                       for code in codes}
            results["codes"] = {code: future.result() for code, future in futures.items()}
    else:
        results["codes"] = {code: coverage_of_code(code, learners, options.fraction, options.splits)
                            for code in codes}
    return results
