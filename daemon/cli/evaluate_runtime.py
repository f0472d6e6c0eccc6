"""`hpcpredict evaluate runtime DATA.csv --target COLUMN`: score the runtime model that would be served.

Splits the runs by configuration (all repetitions of a configuration on the same side),
trains on ``--train-fraction`` of the configurations exactly as ``hpcpredict train-runtime``
does (``--learner auto``, the default: the same cross-validated choice among the servable
learners; ``--learner NAME`` forces one, as ``train-runtime --learner NAME`` does), loads the
result as the daemon loads it and asks it for every held-out run. Prints MAPE, rank accuracy,
interval coverage at 80 % and 95 %, the mean relative width of the 80 % interval, the training
and test sizes, the features kept, the learner chosen and why, and the repetition noise of the
held-out runs (the floor). Runtime features (columns with a ``<name>@t`` report-time column)
are used only when reported within ``--time-share`` of the runtime (seed 000: 5 %).
``--derive NAME=EXPRESSION`` adds an input computed from the others (a code's FFT grid points
from its box and cutoff), as ``train-runtime --derive`` stores it in the served model.
"""
from __future__ import annotations

import json
from pathlib import Path


def register(families) -> None:
    from ..runtime.artifacts import SERVABLE

    parser = families.add_parser("runtime", help="runtime from application inputs: score the served model")
    parser.add_argument("data", type=Path, metavar="DATA.csv", help="one row per run: inputs, target, optional rep")
    parser.add_argument("--target", required=True, help="runtime column (seconds)")
    parser.add_argument("--train-fraction", type=float, default=0.5, help="share of configurations to train on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learner", choices=("auto", *SERVABLE, "linear"), default="auto",
                        help="auto (default): train-runtime's cross-validated choice on the training runs; "
                             "linear: a plain least-squares baseline the daemon does not serve")
    parser.add_argument("--degree", type=int, default=1, help="extra-trees: polynomial expansion order")
    parser.add_argument("--importance-threshold", type=float, default=0.95,
                        help="extra-trees: keep features up to this cumulative importance (1 = all)")
    parser.add_argument("--time-share", type=float, default=0.05,
                        help="use a runtime feature only if reported within this share of the runtime")
    parser.add_argument("--no-runtime-features", action="store_true", help="submit-time inputs only")
    parser.add_argument("--derive", action="append", default=[], metavar="NAME=EXPRESSION",
                        help="an input computed from the others, e.g. 'grid=box**3*cutoff**1.5' (repeatable; "
                             "as train-runtime --derive)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from ..errors import InvalidRequest
    from ..lab.runtime import evaluate, read_runs_csv
    from ..runtime.derived import DerivedInputs

    if not 0 < args.train_fraction < 1:
        raise InvalidRequest("--train-fraction", "must be between 0 and 1 (exclusive)")
    if not 0 < args.importance_threshold <= 1:
        raise InvalidRequest("--importance-threshold", "must be in (0, 1]")
    if not 1 <= args.degree <= 3:
        raise InvalidRequest("--degree", "must be 1, 2 or 3")
    try:
        derived = DerivedInputs.parse(args.derive)
    except ValueError as error:
        raise InvalidRequest("--derive", str(error)) from None
    table = read_runs_csv(args.data, target=args.target, derived=derived)
    if len(set(table.groups.tolist())) < 4:
        raise InvalidRequest("DATA.csv", "needs at least 4 distinct configurations")
    params = {}
    if args.learner == "extra-trees":
        params = {"degree": args.degree,
                  "importance_threshold": None if args.importance_threshold >= 1 else args.importance_threshold}
    result = evaluate(table, learner=args.learner, train_fraction=args.train_fraction, seed=args.seed,
                      params=params, time_share=None if args.no_runtime_features else args.time_share)
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return 0
    print(f"runtime model: {result['learner']}, {result['n_train']} training runs, {result['n_test']} test runs")
    for key, label in (("mape", "MAPE"), ("rank_accuracy", "rank accuracy"), ("coverage80", "coverage (80 %)"),
                       ("coverage95", "coverage (95 %)"), ("interval_width80", "80 % interval width (rel.)")):
        print(f"  {label:<28} {result[key]:8.3f}")
    if "repetition_mape" in result:
        print(f"  {'repetition noise (MAPE)':<28} {result['repetition_mape']:8.3f}")
    print(f"  features kept: {', '.join(result['features_kept'])}")
    if "selection" in result:
        scores = ", ".join(f"{name} {'n/a' if v != v else f'{100 * v:.1f} %'}" for name, v in result["cv_mape"].items())
        print(f"  chosen: {result['selection']['reason']} (cross-validated MAPE: {scores})")
    if result["runtime_features_dropped"]:
        print(f"  runtime features too late (> {args.time_share:.0%} of runtime): "
              f"{', '.join(result['runtime_features_dropped'])}")
    return 0
