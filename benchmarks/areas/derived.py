"""What a code's declared derived inputs buy, judged on training halves only (never the held-out halves).

For one recorded sweep (``--code``), at each ``--fractions`` training share: the configuration-
grouped 5-fold cross-validated MAPE and rank accuracy of each ``--learners`` candidate on the
training half of ``--seeds`` splits (``benchmarks/runtime/derived_check.py``: the folds and fits
of ``auto``'s learner choice), with the derived inputs the sweep declares and without those
named by ``--drop`` (the declarations being judged). The held-out halves, which the ``runtime``
area scores, are never looked at here.

    python -m benchmarks run derived --code cp2k --drop neighbour_pairs,multigrid_points [--fractions 0.5,0.25] [--seeds 6] [--learners log-linear,boosted-trees,blend]
"""
from __future__ import annotations

import argparse

from hpcpredict.daemon.lab.runtime import declared_derived

from .runtime import CODES, DATA

DESCRIPTION = "declared derived inputs of one real code, with and without: training-half CV MAPE and rank accuracy"


def run(args: list[str]) -> dict:
    from benchmarks.runtime.derived_check import training_cv

    parser = argparse.ArgumentParser(prog="python -m benchmarks run derived", description=DESCRIPTION)
    parser.add_argument("--code", choices=sorted(CODES), required=True)
    parser.add_argument("--drop", required=True, help="comma-separated declared derived inputs to judge")
    parser.add_argument("--fractions", default="0.5,0.25")
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--learners", default="log-linear,boosted-trees,blend")
    options = parser.parse_args(args)
    declared = [tuple(pair) for pair in declared_derived(DATA / CODES[options.code]).expressions]
    dropped = options.drop.split(",")
    unknown = sorted(set(dropped) - {name for name, _ in declared})
    if unknown:
        raise SystemExit(f"derived: {', '.join(unknown)} not declared for {options.code}")
    without = [pair for pair in declared if pair[0] not in dropped]
    learners = options.learners.split(",")
    by_fraction = {}
    for fraction in (float(f) for f in options.fractions.split(",")):
        by_fraction[str(fraction)] = {
            "without": training_cv(options.code, without, learners, fraction, options.seeds),
            "declared": training_cv(options.code, declared, learners, fraction, options.seeds),
        }
    headline = {f"{fraction} {learner}": {"mape": [scores["without"][learner]["mape"], scores["declared"][learner]["mape"]],
                                          "rank": [scores["without"][learner]["rank"], scores["declared"][learner]["rank"]]}
                for fraction, scores in by_fraction.items() for learner in learners}
    return {"code": options.code, "declared": [name for name, _ in declared], "judged": dropped,
            "seeds": options.seeds, "learners": learners, "by_fraction": by_fraction,
            "headline": {"without -> declared (mape, rank)": headline}}

