"""Development study of ``--learner auto``'s choice, on splits the benchmarks do not use.

The ``runtime`` area scores splits 0..2 and ``runtime_coverage`` splits 0..9; a selection rule
tuned on them would be tuned on the test. This study uses split seeds ``--first-seed`` (100)
onwards (it refuses seeds below 100) and keeps, per code, training fraction and split,
everything a selection rule needs:

* every single learner's point predictions on the held-out runs, fitted as served (a learner
  that cannot model the runs, such as start-up + steps without a steps input, is left out);
* every single learner's out-of-fold predictions on the training runs for ``--repeats``
  configuration fold assignments (:func:`fold_seeds`: split seed + r, as ``select_learner`` draws
  them; before the repeats, ``select_learner`` used repeat 0 alone).

The blend's predictions are the geometric mean of its members' (:mod:`hpcpredict.daemon.lab.runtime.blend`
fits them with the same seed; calibration does not change point predictions), computed when rules
are compared, so ``--blend`` can try other members without refitting.

Predictions are computed in-process (the benchmarks score the served artifact, which answers as
the fitted model: ``served_as_fitted`` in tests/runtime/test_served_learners.py), cached in
``--cache`` (one ``.npz`` per code, fraction, split and repeat), so rules can then be compared
without refitting: ``--rules`` prints, per code and fraction, each rule's mean held-out MAPE of
the learner it picks, the best forced learner's, their ratio and the choices.

    nice -n 10 python benchmarks/dev/runtime/selection_study.py --splits 10 --repeats 3 [--codes gromacs] [--cache DIR]
    nice -n 10 python benchmarks/dev/runtime/selection_study.py --splits 10 --rules before,pick,pickx3,tie,lowest
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.runtime.blend import MEMBERS, uncalibrated, with_fallback
from hpcpredict.daemon.runtime.conformal import group_folds
from hpcpredict.daemon.lab.runtime import (LearnerNotApplicable, RuntimeModel, declared_derived,
                                           read_runs_csv, split_by_configuration, usable_inputs)
from hpcpredict.daemon.lab.runtime.gaussian_process import MIN_CONFIGURATIONS
from hpcpredict.daemon.lab.runtime import selection

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks.areas.runtime import CODES, DATA  # noqa: E402

SINGLE = tuple(name for name in selection.CANDIDATES if name != selection.HEDGE)
FRACTIONS = (0.1, 0.25, 0.5)
REPORTED_SPLITS = 100   # the runtime areas' split seeds are below: never developed on


def fold_seeds(seed: int, repeats: int) -> list[int]:
    """The fold assignments' seeds of ``repeats`` cross-validations (the first is ``seed``,
    the one ``select_learner`` uses)."""
    return [seed + repeat for repeat in range(repeats)]


def fitted_predictions(name, table, train, rows, params, inputs) -> np.ndarray | None:
    """The learner's predictions of ``rows``, None where it cannot model the runs."""
    try:
        return RuntimeModel(name, params, inputs).fit(table, train).predict(rows)
    except LearnerNotApplicable:
        return None


def held_out(table, train, test, inputs, seed) -> dict[str, np.ndarray]:
    rows = [table.rows[i] for i in test]
    predicted = {name: fitted_predictions(name, table, train, rows, dict(uncalibrated(name, {}), random_state=seed),
                                          inputs) for name in SINGLE}
    return {name: p for name, p in predicted.items() if p is not None}


def out_of_fold(table, train, inputs, seed, fold_seed, folds=5) -> dict[str, np.ndarray] | None:
    groups = table.groups[train]
    n_folds = min(folds, np.unique(groups).size)
    if n_folds < 2:
        return None
    masks = group_folds(groups, n_folds, fold_seed)
    if any((~m).sum() < 2 for m in masks):
        return None
    out = {name: np.empty(train.size) for name in SINGLE}
    for mask in masks:
        test = [table.rows[i] for i in train[mask]]
        for name in list(out):
            params = dict(selection.without_calibration(name, {}), random_state=seed)
            predicted = fitted_predictions(name, table, train[~mask], test, params, inputs)
            if predicted is None:
                del out[name]
            else:
                out[name][mask] = predicted
    return out


def compute(cache: Path, codes, splits: int, first_seed: int, repeats: int, fractions=FRACTIONS,
            folds: int = 5) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    for code in codes:
        path = DATA / CODES[code]
        table = read_runs_csv(path, target="runtime_s", derived=declared_derived(path))
        for fraction in fractions:
            for seed in range(first_seed, first_seed + splits):
                train, test = split_by_configuration(table.groups, fraction, seed)
                inputs, _, _ = usable_inputs(table, train, time_share=None)
                target = cache / f"{code}-{fraction}-{seed}-heldout.npz"
                if not target.exists():
                    started = time.time()
                    np.savez(target, **held_out(table, train, test, inputs, seed), seconds=time.time() - started)
                for repeat, fold_seed in enumerate(fold_seeds(seed, repeats)):
                    target = cache / f"{code}-{fraction}-{seed}-cv{repeat}.npz"
                    if target.exists():
                        continue
                    started = time.time()
                    oof = out_of_fold(table, train, inputs, seed, fold_seed, folds)
                    np.savez(target, **(oof or {}), seconds=time.time() - started)
                print(code, fraction, seed, flush=True)


def _candidates(f, members, configurations: int) -> dict[str, np.ndarray]:
    """The cached single learners' predictions, in ``selection.CANDIDATES``' order, and the blend of
    ``members`` (:func:`with_fallback`'s stand-in for a member that could not model the runs).
    ``configurations``: the fewest a model of these predictions trained on; the Gaussian process
    is left out below its minimum (caches computed before it had one hold its predictions)."""
    predicted = {name: f[name] for name in SINGLE if name in f.files
                 and not (name == "gaussian-process" and configurations < MIN_CONFIGURATIONS)}
    chosen = with_fallback(predicted, members)
    if chosen is not None:
        predicted["blend"] = np.exp(np.mean(np.log(chosen), axis=0))
    return predicted


def load(cache: Path, code: str, fraction: float, seed: int, repeats: int, members=MEMBERS, folds: int = 5):
    path = DATA / CODES[code]
    table = read_runs_csv(path, target="runtime_s", derived=declared_derived(path))
    train, test = split_by_configuration(table.groups, fraction, seed)
    n = np.unique(table.groups[train]).size
    with np.load(cache / f"{code}-{fraction}-{seed}-heldout.npz") as f:
        heldout = {name: float(np.mean(np.abs(p - table.y[test]) / table.y[test]))
                   for name, p in _candidates(f, members, n).items()}
    cv = []
    for repeat in range(repeats):
        with np.load(cache / f"{code}-{fraction}-{seed}-cv{repeat}.npz") as f:
            if not f.files or f.files == ["seconds"]:
                return heldout, None, table.groups[train]
            smallest_fold_training = n - math.ceil(n / folds)   # configurations are dealt round robin
            cv.append({name: np.abs(p - table.y[train]) / table.y[train]
                       for name, p in _candidates(f, members, smallest_fold_training).items()})
    return heldout, cv, table.groups[train]


def rules(cache: Path, codes, splits: int, first_seed: int, repeats: int, rule_names: list[str],
          fractions=FRACTIONS, members=MEMBERS, folds: int = 5) -> dict:
    report = {}
    for code in codes:
        for fraction in fractions:
            picks = {rule: [] for rule in rule_names}
            forced = {name: [] for name in selection.CANDIDATES}
            for seed in range(first_seed, first_seed + splits):
                needed = max(int(rule.split("x")[-1]) if "x" in rule else 1 for rule in rule_names)
                heldout, cv, groups = load(cache, code, fraction, seed, needed, members, folds)
                for name in forced:
                    forced[name].append(heldout.get(name, np.nan))
                for rule in rule_names:
                    n = int(rule.split("x")[-1]) if "x" in rule else 1
                    errors = None if cv is None else [
                        {name: selection.per_configuration(groups, e[name]) for name in e} for e in cv[:n]]
                    chosen = RULES[rule.split("x")[0]](errors)
                    picks[rule].append((chosen, heldout[chosen]))
            means = {name: float(np.mean(v)) for name, v in forced.items() if not np.isnan(v).any()}
            best = min(means, key=means.get)
            row = {"best": best, "best_mape": means[best], "forced": means}
            for rule, chosen in picks.items():
                mape = float(np.mean([m for _, m in chosen]))
                row[rule] = {"mape": mape, "ratio": mape / means[best], "chosen": dict(Counter(c for c, _ in chosen))}
            report[f"{code} {fraction}"] = row
    return report


def _mean_errors(errors):
    return {name: np.mean([e[name] for e in errors], axis=0) for name in errors[0]}


def _singles(errors):
    return {name: e for name, e in errors.items() if name != "blend"}


def _before(errors):
    """The rule ``auto`` used before the blend was made the hedge: simplest first, the blend last,
    each richer candidate replacing the choice when it beats it clearly."""
    chosen = next(iter(errors))
    for name, candidate in errors.items():
        if selection.clearly_better(candidate, errors[chosen]):
            chosen = name
    return chosen


def _tie(errors):
    """The single learners' choice; the blend replaces it when its mean error is lower at all."""
    chosen = selection.pick(_singles(errors))
    return "blend" if errors["blend"].mean() < errors[chosen].mean() else chosen


def _lowest(errors):
    means = {name: e.mean() for name, e in errors.items()}
    return min(means, key=means.get)


def _rule(function):
    return lambda errors: function(_mean_errors(errors)) if errors else "log-linear"


RULES = {
    "before": _rule(_before),               # x1: the choice before the change
    "pick": _rule(selection.pick),          # the choice served now
    "tie": _rule(_tie),
    "lowest": _rule(_lowest),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", default=",".join(CODES))
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/hpcpredict-selection-study"))
    parser.add_argument("--fractions", default="0.1,0.25,0.5")
    parser.add_argument("--folds", type=int, default=5, help="configuration folds of each cross-validation "
                        "(select_learner's ``folds``; a cache holds one setting: give the same to --rules)")
    parser.add_argument("--blend", default=",".join(MEMBERS),
                        help="the blend's members when rules are compared (from the cached single learners)")
    parser.add_argument("--rules", default="",
                        help="compare rules (RULES), e.g. before,pick,pickx3: NAMExN averages the "
                             "errors of N fold assignments (default 1)")
    options = parser.parse_args()
    if options.first_seed < REPORTED_SPLITS:
        parser.error(f"splits below {REPORTED_SPLITS} are the benchmarks' (runtime: 0-2, runtime_coverage: 0-9)")
    codes = [c for c in options.codes.split(",") if c]
    if options.rules:
        names = [r for r in options.rules.split(",") if r]
        print(json.dumps(rules(options.cache, codes, options.splits, options.first_seed, options.repeats, names,
                               [float(f) for f in options.fractions.split(",")], options.blend.split(","),
                               options.folds),
                         indent=1))
    else:
        compute(options.cache, codes, options.splits, options.first_seed, options.repeats,
                [float(f) for f in options.fractions.split(",")], options.folds)


if __name__ == "__main__":
    main()
