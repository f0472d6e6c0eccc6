"""Does a candidate derived input help? Judged as ``auto`` would judge it: on training halves only.

For each split of ``benchmarks run runtime`` at ``--fraction`` (``split_by_configuration``,
seeds 0..``--seeds``-1), only the TRAINING configurations are used: the configuration-grouped
5-fold cross-validated MAPE of each cheap candidate learner (``select_learner``'s folds and
fits), with the sweep's declared derived inputs (``--declared``: as recorded in the JSON; the
default) or none (``--no-declared``), plus each ``--derive NAME=EXPR``; and the rank accuracy of
the same out-of-fold predictions (pairs of training runs ordered as the runs are,
:func:`rank_accuracy`), since a derived input can sharpen the order of jobs without moving the
mean error. ``--without NAME`` drops a declared one (is it still worth keeping?). The held-out
half is never looked at, so a derived input kept because it helps here is not fitted to the
test split.

    python -m benchmarks.runtime.derived_check gromacs --derive 'atoms=...' [--derive ...]
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks.runtime.residuals import DATA, FILES
from hpcpredict.daemon.lab.runtime import (CANDIDATES, mape, out_of_fold_predictions, rank_accuracy,
                                           read_runs_csv, split_by_configuration, usable_inputs)
from hpcpredict.daemon.runtime.derived import DerivedInputs


def training_cv(code: str, declarations: list[tuple[str, str]], learners: list[str], fraction: float,
                seeds: int) -> dict[str, dict[str, float]]:
    """Mean over splits of each learner's grouped-CV MAPE and rank accuracy on the training half."""
    derived = DerivedInputs(declarations)
    table = read_runs_csv(DATA / FILES[code], target="runtime_s", derived=derived or None)
    scores = {learner: {"mape": [], "rank": []} for learner in learners}
    for seed in range(seeds):
        train, _ = split_by_configuration(table.groups, fraction, seed)
        inputs, _, _ = usable_inputs(table, train, time_share=None)
        for learner in learners:
            predicted = out_of_fold_predictions(table, train, learner, CANDIDATES[learner], inputs=inputs, seed=seed)
            scores[learner]["mape"].append(mape(table.y[train], predicted))
            scores[learner]["rank"].append(rank_accuracy(table.y[train], predicted))
    return {learner: {metric: round(float(np.mean(values)), 4) for metric, values in by_metric.items()}
            for learner, by_metric in scores.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("code", choices=sorted(FILES))
    parser.add_argument("--derive", action="append", default=[], metavar="NAME=EXPR")
    parser.add_argument("--no-declared", action="store_true")
    parser.add_argument("--without", action="append", default=[], metavar="NAME",
                        help="leave this declared derived input out")
    parser.add_argument("--learners", default="log-linear,boosted-trees,extra-trees")
    parser.add_argument("--together", action="store_true",
                        help="only all --derive together (a later one may read an earlier one)")
    parser.add_argument("--fraction", type=float, default=0.5)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    meta = (DATA / FILES[args.code]).with_suffix(".json")
    declared = [] if args.no_declared or not meta.exists() else json.loads(meta.read_text()).get("derived_inputs", [])
    base = [tuple(pair) for pair in declared if pair[0] not in args.without]
    learners = args.learners.split(",")
    print("baseline", base and [n for n, _ in base], training_cv(args.code, base, learners, args.fraction, args.seeds))
    extra = DerivedInputs.parse(args.derive).expressions
    for name, text in ([] if args.together else extra):
        print("+", name, training_cv(args.code, base + [(name, text)], learners, args.fraction, args.seeds))
    if len(extra) > 1 or args.together:
        print("+ all", training_cv(args.code, base + extra, learners, args.fraction, args.seeds))


if __name__ == "__main__":
    main()
