"""`hpcpredict suggest-runs`: which runs to make next (seed 003's active learning).

Candidates come from a CSV (one configuration per row) or from ``--grid name=v1,v2,...``
(Cartesian product). An ANN ensemble fitted on the runs done so far predicts every
candidate with every member; the least confident (highest coefficient of variation) are
proposed, at least ``--min-distance`` apart in standardised input space.
"""
from __future__ import annotations

import json
from pathlib import Path

MAX_CANDIDATES = 200_000


def register(subparsers) -> None:
    parser = subparsers.add_parser("suggest-runs", help="rank candidate runs by model uncertainty (active learning)")
    parser.add_argument("--done", type=Path, required=True, metavar="RUNS.csv",
                        help="runs made so far: input columns, the target column, optional rep")
    parser.add_argument("--target", required=True, help="runtime column of RUNS.csv")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--candidates", type=Path, metavar="GRID.csv", help="one candidate configuration per row")
    source.add_argument("--grid", action="append", metavar="NAME=V1,V2,...",
                        help="candidate values of one input (repeat; Cartesian product)")
    parser.add_argument("-k", type=int, default=5, help="number of runs to propose")
    parser.add_argument("--min-distance", type=float, default=0.5, help="minimum standardised distance between picks")
    parser.add_argument("--members", type=int, default=10, help="ensemble size")
    parser.add_argument("--density", action="store_true",
                        help="rank by CoV x density among the candidates (keeps picks off the corners of "
                             "many-input spaces)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=run)


def _grid(specs: list[str]) -> list[dict]:
    from itertools import product

    from ..errors import InvalidRequest
    from ..runtime.values import coerce_value, valid_key

    names, values = [], []
    size = 1
    for spec in specs:
        name, sep, raw = spec.partition("=")
        items = [coerce_value(v) for v in raw.split(",") if v.strip()]
        if not sep or not valid_key(name) or not items:
            raise InvalidRequest("--grid", f"expected NAME=V1,V2,...: {spec!r}")
        names.append(name)
        values.append(items)
        size *= len(items)
        if size > MAX_CANDIDATES:
            raise InvalidRequest("--grid", f"more than {MAX_CANDIDATES} candidates")
    return [dict(zip(names, combo)) for combo in product(*values)]


def run(args) -> int:

    from ..errors import InvalidRequest
    from ..lab.runtime import read_runs_csv, suggest_runs
    from ..runtime.encoding import InputEncoder
    from ..runtime.values import coerce_value

    if args.k < 1 or args.members < 2 or args.min_distance < 0:
        raise InvalidRequest("-k/--members/--min-distance", "need k >= 1, members >= 2, distance >= 0")
    done = read_runs_csv(args.done, target=args.target)
    if args.grid:
        candidates = _grid(args.grid)
    else:
        import csv

        try:
            with args.candidates.open(newline="", encoding="utf-8", errors="replace") as handle:
                candidates = [{k.strip(): coerce_value(v) for k, v in row.items() if k and v not in (None, "")}
                              for _, row in zip(range(MAX_CANDIDATES + 1), csv.DictReader(handle))]
        except OSError as error:
            raise InvalidRequest("--candidates", f"cannot read {args.candidates}: {error.strerror}") from error
        if len(candidates) > MAX_CANDIDATES:
            raise InvalidRequest("--candidates", f"more than {MAX_CANDIDATES} candidates")
    if not candidates:
        raise InvalidRequest("--candidates", "no candidate configuration")
    names = list(candidates[0])
    missing = [name for name in names if name not in done.inputs]
    if missing:
        raise InvalidRequest("--done", f"runs lack candidate input(s): {', '.join(missing)}")
    if len(set(done.groups.tolist())) < 3:
        raise InvalidRequest("--done", "need runs of at least 3 configurations")
    encoder = InputEncoder().fit(done.rows, names)
    X_done = encoder.transform(done.rows)
    X_candidates = encoder.transform(candidates)
    picked, cov, predicted = suggest_runs(X_candidates, X_done, done.y, k=args.k, min_distance=args.min_distance,
                               groups=done.groups, n_members=args.members, random_state=args.seed,
                               density=args.density)
    chosen = [dict(candidates[i], predicted_s=round(float(predicted[i]), 4), cov=round(float(cov[i]), 4))
              for i in picked]
    if args.json:
        print(json.dumps({"suggestions": chosen, "n_candidates": len(candidates), "n_done": len(done.y)}))
        return 0
    print(f"next {len(chosen)} run(s) of {len(candidates)} candidates (by ensemble CoV):")
    for row in chosen:
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0
