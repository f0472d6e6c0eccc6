"""Scaffolding shared by the scaling development harnesses (DEV seeds only).

The harnesses (noisy_line_dev.py, combine_dev.py, selection_rules.py) draw synthetic_protocol.py
tasks for a development seed, run variants of the adaptive modeler on them and compare with
Extra-P 4.2.5 (median), whose results are cached per (seed, m, functions, noise levels) because
they do not change between variants. The reported seeds (3, 7) are refused: rules are chosen on
other seeds, then the reported protocol is run once.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scaling"))  # synthetic_protocol

import synthetic_protocol as protocol  # noqa: E402

REPORTED_SEEDS = (3, 7)
EXTRAP_CACHE = Path("/tmp/h7r4")
OLD_EXTRAP_CACHES = (Path("/tmp/h7r3"),)


def dev_parser(doc: str, *, functions: int, m: int, noise: list[float]) -> argparse.ArgumentParser:
    """Parser with the options every harness has: --seed, --functions, --m, --noise."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=101)
    parser.add_argument("--functions", type=int, default=functions)
    parser.add_argument("--m", type=int, default=m)
    parser.add_argument("--noise", type=float, nargs="+", default=noise,
                        help="noise levels the tasks are drawn for (fixes the task stream)")
    return parser


def add_modelling_options(parser: argparse.ArgumentParser, variants: list[str]) -> None:
    """Options of the harnesses that model noisy lines: --evaluate, --variants, --extrap-python,
    --adapt-samples."""
    parser.add_argument("--evaluate", type=float, nargs="+", default=[0.5, 0.75, 1.0],
                        help="noise levels actually modelled")
    parser.add_argument("--variants", nargs="+", default=variants)
    parser.add_argument("--extrap-python", default=None)
    parser.add_argument("--adapt-samples", type=int, default=150)


def parse_dev_args(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.seed in REPORTED_SEEDS:
        parser.error(f"seed {args.seed} is a reported evaluation run; develop on another seed")
    return args


def dev_tasks(args: argparse.Namespace) -> list[dict]:
    """The protocol's task stream for (seed, m, noise levels, functions), ids 0..n-1."""
    rng = np.random.default_rng(args.seed)
    tasks = [protocol.make_task(rng, args.m, noise, k) for noise in args.noise for k in range(args.functions)]
    for k, task in enumerate(tasks):
        task["id"] = k
    return tasks


def extrap_results(args: argparse.Namespace, tasks: list[dict], extrap_python: str) -> list[dict]:
    """Extra-P 4.2.5 (median) on every task of the stream, cached."""
    name = f"extrap_{args.seed}_{args.m}_{args.functions}_{'-'.join(map(str, args.noise))}.json"
    cache = EXTRAP_CACHE / name
    if not cache.exists():
        old = next((d / name for d in OLD_EXTRAP_CACHES if (d / name).exists()), None)
        cache.parent.mkdir(parents=True, exist_ok=True)
        text = old.read_text() if old else json.dumps(protocol.run_extrap(tasks, extrap_python, "median"))
        cache.write_text(text)
    return json.loads(cache.read_text())


def print_rows(rows: list[dict], noise_levels, label: str = "variant") -> None:
    """Markdown table of protocol.summarise rows, with the error ratio to Extra-P per row."""
    ref = {r["noise"]: r for r in rows if r["modeler"] == "Extra-P"}
    print(f"| noise | {label} | d≤1/4 | d≤1/3 | d≤1/2 | P1+ | P2+ | P3+ | P4+ |")
    print("|---|---|---|---|---|---|---|---|---|")
    for noise in noise_levels:
        for row in rows:
            if abs(row["noise"] - noise) < 1e-9:
                accs = [v for k, v in row.items() if k.startswith("acc")]
                base = ref.get(row["noise"])
                ratio = "" if base is None else " (" + "/".join(
                    f"{row[f'P{k}+'] / max(base[f'P{k}+'], 1e-12):.2f}" for k in range(1, 5)) + ")"
                print(f"| {noise:.0%} | {row['modeler']} | " + " | ".join(f"{a:.0f}" for a in accs) + " | "
                      + " | ".join(f"{row[f'P{k}+']:.1f}" for k in range(1, 5)) + f" |{ratio}")


def print_targets(rows: list[dict], variants) -> None:
    """Per variant: accuracy cells >= Extra-P, and at >= 50 % noise the extrapolation cells
    <= 0.8x Extra-P with the mean ratio; below 50 % the mean ratio (cells <= 1.0x)."""
    ref = {r["noise"]: r for r in rows if r["modeler"] == "Extra-P"}
    if not ref:
        return
    for variant in variants:
        mine = {r["noise"]: r for r in rows if r["modeler"] == variant}
        acc = sum(mine[n][k] >= ref[n][k] - 1e-9 for n in mine for k in mine[n] if k.startswith("acc"))
        high = [mine[n][f"P{k}+"] / ref[n][f"P{k}+"] for n in mine if n >= 0.5 for k in range(1, 5)]
        low = [mine[n][f"P{k}+"] / ref[n][f"P{k}+"] for n in mine if n < 0.5 for k in range(1, 5)]
        line = (f"{variant:<18} accuracy cells >= Extra-P: {acc}/{3 * len(mine)}; noise>=50%: "
                f"<=0.8x {sum(r <= 0.8 for r in high)}/{len(high)}, mean ratio {np.mean(high) if high else 0:.2f}")
        if low:
            line += f"; noise<50%: <=1.0x {sum(r <= 1.0 for r in low)}/{len(low)}, mean ratio {np.mean(low):.2f}"
        print(line)


def report(tasks: list[dict], results: dict, noise_levels, variants, label: str = "variant") -> None:
    """Summarise the results per noise level and print the table and the target counts."""
    rows = protocol.summarise(tasks, results)
    print_rows(rows, noise_levels, label)
    print_targets(rows, variants)
