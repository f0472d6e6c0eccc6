"""Record a code's SCF iteration count per configuration of a recorded sweep, from a probe pass.

The probe is the sweep harness itself (``benchmarks/runtime/sweep.py`` with ``--reps 1`` and the
recorded sweep's seeds, designs and first configurations, so it draws the same configurations
and writes the same inputs), whose code module reports ``_iterations`` from the code's own output.
This script checks the probe's inputs against the recorded sweep configuration by configuration,
compares a second run of some configurations (``--repeat``: the count should not change), and
writes ``{config: count}`` with the probe's provenance:

    python -m benchmarks.runtime.record_iterations cp2k --probe PROBE.csv --repeat REPEAT.csv \\
        --out tests/data/runtime/cp2k_iterations.json
"""
from __future__ import annotations

import argparse
import csv
import importlib
import json
from datetime import datetime, timezone
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "runtime"
SWEEPS = {"cp2k": "cp2k_water.csv", "nwchem": "nwchem_water.csv"}


def _same(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


def configurations(path: Path, inputs: list[str]) -> dict[str, dict[str, str]]:
    """config -> its input values (as written), checking that every repetition agrees."""
    found: dict[str, dict[str, str]] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            values = {name: row[name] for name in inputs}
            earlier = found.setdefault(row["config"], values)
            if any(not _same(earlier[name], values[name]) for name in inputs):
                raise SystemExit(f"{path}: configuration {row['config']} has different inputs in different rows")
    return found


def counts(path: Path) -> dict[str, int | None]:
    with path.open(newline="") as handle:
        return {row["config"]: (int(row["_iterations"]) if row["_iterations"] else None)
                for row in csv.DictReader(handle)}


def sweep_command(arguments: dict) -> str:
    """The sweep.py command line of one recorded pass (its ``arguments`` in the provenance)."""
    flags = []
    for key, value in arguments.items():
        if key == "code" or value in (False, "", None):
            continue
        flags.append(f"--{key.replace('_', '-')}" + ("" if value is True else f" {value}"))
    return f"python -m benchmarks.runtime.sweep {arguments['code']} " + " ".join(flags)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("code", choices=sorted(SWEEPS))
    parser.add_argument("--probe", type=Path, required=True, action="append",
                        help="a probe pass's CSV (sweep.py --reps 1); repeated for passes that split the work (--only)")
    parser.add_argument("--repeat", type=Path, help="a second probe pass over some configurations")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    code = importlib.import_module(f"benchmarks.runtime.sweep_{args.code}")
    sweep = configurations(DATA / SWEEPS[args.code], code.INPUTS)
    probed: dict[str, dict[str, str]] = {}
    iterations: dict[str, int | None] = {}
    for path in args.probe:
        found = configurations(path, code.INPUTS)
        if set(found) & set(probed):
            raise SystemExit(f"{path}: configurations probed twice: {sorted(set(found) & set(probed), key=int)}")
        probed |= found
        iterations |= counts(path)
    if sorted(sweep, key=int) != sorted(probed, key=int):
        raise SystemExit(f"probe configurations differ from the sweep's: missing "
                         f"{sorted(set(sweep) - set(probed), key=int)}, extra {sorted(set(probed) - set(sweep), key=int)}")
    for config, values in sweep.items():
        differing = [name for name in code.INPUTS if not _same(values[name], probed[config][name])]
        if differing:
            raise SystemExit(f"configuration {config}: the probe ran other inputs ({', '.join(differing)}): "
                             f"sweep {values}, probe {probed[config]}")
    missing = sorted((config for config, count in iterations.items() if count is None), key=int)
    if missing:
        raise SystemExit(f"no iteration count (not converged or not parsed) for configurations {missing}")
    metas = [json.loads(path.with_suffix(".json").read_text()) for path in args.probe]
    probe_meta = metas[0]
    if len({meta["package_version"] for meta in metas}) != 1:
        raise SystemExit("probe passes ran different package versions")
    passes = [meta["arguments"] for meta in metas]
    record = {
        "code": args.code, "sweep": SWEEPS[args.code],
        "count": ("SCF steps of the Quickstep energy run: CP2K's '*** SCF run converged in N steps ***'"
                  if args.code == "cp2k" else
                  "iterations of the SCF (RHF, quadratically convergent: macro-iterations) or DFT (B3LYP) "
                  "table NWChem printed, the last iteration number"),
        "iterations": {config: iterations[config] for config in sorted(iterations, key=int)},
        "provenance": {
            "commands": [sweep_command(arguments) for arguments in passes],
            "package": probe_meta["package"], "package_version": probe_meta["package_version"],
            "program_version": probe_meta["program_version"], "command_template": probe_meta["command_template"],
            "machine": probe_meta["machine"], "nice": probe_meta["nice"],
            "started_utc": min(meta["started_utc"] for meta in metas),
            "finished_utc": max(meta["finished_utc"] for meta in metas),
            "inputs_checked_against": SWEEPS[args.code] + " (every configuration, every input)",
            "recorded_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
    }
    if args.repeat:
        again = counts(args.repeat)
        repeated = configurations(args.repeat, code.INPUTS)
        for config, values in repeated.items():
            if any(not _same(values[name], sweep[config][name]) for name in code.INPUTS):
                raise SystemExit(f"repeat: configuration {config} ran other inputs")
        record["determinism"] = {
            "configurations_run_twice": len(again),
            "with_2_ranks": sum(1 for config in again if float(sweep[config]["ranks"]) == 2),
            "same_count": sum(1 for config, count in again.items() if count == iterations[config]),
            "differing": {config: [iterations[config], count] for config, count in again.items()
                          if count != iterations[config]},
        }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{args.code}: {len(iterations)} configurations -> {args.out}"
          + (f"; repeat: {record['determinism']['same_count']}/{len(again)} same" if args.repeat else ""))


if __name__ == "__main__":
    main()
