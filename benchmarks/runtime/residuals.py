"""Where a code's runtime model errs, and how much of it is noise the repetitions do not see.

For one recorded sweep (tests/data/runtime/CODE_water.csv), on ALL its configurations:

* out-of-fold predictions: configuration-grouped 5-fold cross-validation (the folds of
  ``daemon/lab/runtime/selection.py``: :func:`group_folds`), for the log-linear and boosted-trees
  learners (the cheap candidates ``auto`` chooses between on these codes), with the sweep's
  declared derived inputs plus any ``--derive NAME=EXPR``;
* the absolute percentage error and the signed log ratio (log predicted / measured) grouped by
  every input, by the sweep pass (appended with ``--resume``) and block (configurations whose
  repetitions interleave, run minutes apart), by the machine's load (``_load1``) and by the start-up share (runtime of the
  configuration over the smallest runtime of the same code and ranks: near 1 the run is mostly
  start-up);
* drift between blocks, which the repetition noise (measured within a block) cannot see:
  ``leave-one-block-out`` (every configuration predicted by a model that saw no configuration
  of its block) against grouped K-fold with the same number of folds, and the variance of the
  block means of the out-of-fold log residuals beyond what the configurations' own scatter
  gives (a random-effects estimate, ``between_block_sigma``). The noise a model of the inputs
  faces is then within-block repetition noise plus the block effect: ``repetition_mape`` with
  the block effect added to each run (``repetition_mape_with_block_effect``), the better floor.
  Valid where configurations are drawn independently of their block (not the CP2K ``box``
  design, whose scans share a block: ``--configs 0:60`` takes its first design only).

    python -m benchmarks.runtime.residuals gromacs [--derive NAME=EXPR ...] [--learners log-linear,boosted-trees]

Prints tables (pandas) and writes ``--json`` if given. Analysis only: nothing here is served.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from hpcpredict.daemon.runtime.conformal import group_folds
from hpcpredict.daemon.lab.runtime import (RuntimeModel, between_block_sigma, read_runs_csv,
                                           repetition_disagreement, repetition_mape_with_block_effect,
                                           without_calibration)
from hpcpredict.daemon.runtime.derived import DerivedInputs

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "runtime"
FILES = {"lammps": "lammps_melt_quiet.csv", "gromacs": "gromacs_water.csv", "cp2k": "cp2k_water.csv",
         "nwchem": "nwchem_water.csv"}


def blocks(code: str, configs: pd.Series) -> pd.Series:
    """Sweep block of each configuration, from the sweep's recorded arguments (``--block``, and
    ``--first-config`` of passes appended with ``--resume``)."""
    meta_path = (DATA / FILES[code]).with_suffix(".json")
    if not meta_path.exists():
        return configs // 10
    meta = json.loads(meta_path.read_text())
    passes = [meta["arguments"]] + [p["arguments"] for p in meta.get("resumed_passes", [])]
    starts = sorted({(p.get("first_config", 0), p.get("block", 10)) for p in passes})

    def block_of(config: int) -> int:   # numbered in the order the sweep ran them
        first, size = max((s for s in starts if s[0] <= config), key=lambda s: s[0])
        return first * 1000 + (config - first) // size
    return configs.map(block_of)


def out_of_fold(table, learner: str, fold_of: np.ndarray, seed: int = 0) -> np.ndarray:
    """Prediction of every run by a model fitted on the runs of the other folds."""
    predicted = np.empty(table.y.size)
    for fold in np.unique(fold_of):
        held = fold_of == fold
        model = RuntimeModel(learner, dict(without_calibration(learner, {}), random_state=seed))
        model.fit(table, np.flatnonzero(~held))
        predicted[held] = model.predict([table.rows[i] for i in np.flatnonzero(held)])
    return predicted


def grouped_folds(groups: np.ndarray, n_folds: int, seed: int) -> np.ndarray:
    assignment = np.zeros(groups.size, dtype=int)
    for k, mask in enumerate(group_folds(groups, n_folds, seed)):
        assignment[mask] = k
    return assignment


def analyse(code: str, extra: list[str], learners: list[str], seed: int = 0,
            configs: tuple[int, int] | None = None) -> dict:
    path = DATA / FILES[code]
    meta_path = path.with_suffix(".json")
    declared = json.loads(meta_path.read_text()).get("derived_inputs", []) if meta_path.exists() else []
    derived = DerivedInputs([tuple(pair) for pair in declared] + [tuple(DerivedInputs.parse([e]).expressions[0])
                                                                  for e in extra])
    table = read_runs_csv(path, target="runtime_s", derived=derived or None)
    raw = pd.read_csv(path)
    if configs:   # a part of the sweep (one design, whose configurations were drawn independently)
        config = raw["config"].to_numpy()   # the sweep's numbers (table.groups renumbers them)
        keep = np.flatnonzero((config >= configs[0]) & (config < configs[1]))
        table = dataclasses.replace(table, rows=[table.rows[i] for i in keep], y=table.y[keep], groups=table.groups[keep],
                                    report_times={k: v[keep] for k, v in table.report_times.items()})
        raw = raw.iloc[keep].reset_index(drop=True)
    frame = pd.DataFrame(table.rows)
    # config: the sweep's numbers (blocks follow them); _runtime: the target (not "y": LAMMPS has an input y)
    frame["config"], frame["_runtime"] = raw["config"].to_numpy(), table.y
    for column in ("_load1", "_utc", "rep"):
        frame[column] = raw[column].to_numpy()
    frame["block"] = blocks(code, frame["config"]).to_numpy()
    frame["pass"] = frame["block"] // 1000   # the first configuration of the sweep pass (``--first-config``)
    frame["time"] = pd.to_datetime(frame["_utc"])
    key = ["ranks"] if "ranks" in frame else []
    smallest = frame.groupby(key)["_runtime"].transform("min") if key else frame["_runtime"].min()
    frame["startup_share"] = pd.cut(smallest / frame.groupby("config")["_runtime"].transform("mean"),
                                     [0, 0.1, 0.2, 0.4, 1.01])
    out = {"code": code, "runs": int(len(frame)), "configurations": int(frame["config"].nunique()),
           "derived_inputs": derived.to_json(), "repetition_mape": repetition_disagreement(table.groups, table.y)}

    # Within-block repetition noise, as σ of log runtime (pooled within configurations).
    log_y = np.log(frame["_runtime"])
    centred = log_y - log_y.groupby(frame["config"]).transform("mean")
    counts = frame.groupby("config")["_runtime"].transform("size")
    sigma_within = math.sqrt(float((centred ** 2).sum() / (len(frame) - frame["config"].nunique())))
    out["sigma_within"] = sigma_within
    n_blocks = frame["block"].nunique()
    for learner in learners:
        result = {}
        kfold = out_of_fold(table, learner, grouped_folds(table.groups, 5, seed), seed)
        frame[f"ape_{learner}"] = np.abs(kfold - table.y) / table.y
        frame[f"logr_{learner}"] = np.log(kfold / table.y)
        result["cv5_mape"] = float(frame[f"ape_{learner}"].mean())
        out[learner] = result
        if n_blocks < 2:
            # One block (``--block`` >= the configurations): repetitions are a pass apart, so the
            # repetition noise already holds the machine's drift and there is no block to leave out.
            result["between_block"] = None
            continue
        # Same number of folds, folds = blocks vs folds = random configuration groups.
        by_block = out_of_fold(table, learner, pd.factorize(frame["block"])[0], seed)
        random_k = out_of_fold(table, learner, grouped_folds(table.groups, n_blocks, seed), seed)
        result["leave_one_block_out_mape"] = float(np.mean(np.abs(by_block - table.y) / table.y))
        result[f"grouped_{n_blocks}fold_mape"] = float(np.mean(np.abs(random_k - table.y) / table.y))
        per_config = frame.assign(r=np.log(random_k / table.y)).groupby("config").agg(
            r=("r", "mean"), block=("block", "first"))
        result["between_block"] = between_block_sigma(per_config, "r")
        sigma_b = result["between_block"]["sigma"]
        # A new run predicted by a perfect model of the inputs: within-block σ plus the block effect.
        result["repetition_mape_with_block_effect"] = repetition_mape_with_block_effect(frame, sigma_b)
    out["tables"] = {}
    columns = [c for c in table.inputs if frame[c].nunique() <= 12] + ["pass", "block", "startup_share"]
    frame["load"] = pd.cut(frame["_load1"], [0, 2, 4, 8, 12, 30])
    columns.append("load")
    for column in columns:
        summary = frame.groupby(column, observed=True).agg(
            runs=("_runtime", "size"),
            **{f"mape_{l}": (f"ape_{l}", "mean") for l in learners},
            **{f"bias_{l}": (f"logr_{l}", "mean") for l in learners})
        out["tables"][column] = summary
    worst = frame.groupby("config").agg(
        **{c: (c, "first") for c in table.inputs}, _runtime=("_runtime", "mean"), block=("block", "first"),
        **{f"ape_{l}": (f"ape_{l}", "mean") for l in learners}).sort_values(f"ape_{learners[-1]}", ascending=False)
    out["worst"] = worst.head(12)
    out["frame"] = frame
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("code", choices=sorted(FILES))
    parser.add_argument("--derive", action="append", default=[], metavar="NAME=EXPR")
    parser.add_argument("--learners", default="log-linear,boosted-trees")
    parser.add_argument("--configs", metavar="FIRST:END", help="only configurations FIRST..END-1")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quiet", action="store_true", help="only the summary numbers")
    args = parser.parse_args()
    configs = tuple(int(part) for part in args.configs.split(":")) if args.configs else None
    result = analyse(args.code, args.derive, args.learners.split(","), configs=configs)
    pd.set_option("display.width", 200, "display.max_columns", 30, "display.precision", 3)
    summary = {k: v for k, v in result.items() if k not in ("tables", "worst", "frame")}
    print(json.dumps(summary, indent=1, default=float))
    if not args.quiet:
        for name, tab in result["tables"].items():
            print(f"\n-- by {name}\n{tab}")
        print(f"\n-- worst configurations\n{result['worst']}")
    if args.json:
        args.json.write_text(json.dumps(summary | {"tables": {k: json.loads(v.to_json(orient='split', default_handler=str))
                                                             for k, v in result["tables"].items()}},
                                        indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
