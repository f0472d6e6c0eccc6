"""Run one benchmark area and record its results with where and how they were measured.

    python -m benchmarks list               # also checks every area keeps the contract below
    python -m benchmarks run AREA [AREA's own options]

An area is a module ``benchmarks/areas/AREA.py`` with ``DESCRIPTION`` (one line) and
``run(args: list[str]) -> dict`` (it parses its own options and returns JSON-serialisable
results; an optional ``"headline"`` entry holds the few numbers benchmarks/README.md quotes,
printed after the run). The runner writes ``benchmarks/results/AREA.json`` (``--out`` to write elsewhere;
a bare file name stays in ``benchmarks/results``):
the results stamped with the command, the git commit, the machine and the load around the run
(load average and the CPU time the hypervisor stole, in cores), so every number in
benchmarks/README.md can be traced to the run that produced it.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.machine import machine

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def areas() -> list[str]:
    return sorted(module.name for module in pkgutil.iter_modules([str(HERE / "areas")]))


def contract_breaches(name: str, module) -> list[str]:
    """What area ``name`` lacks of the contract: a one-line DESCRIPTION and a run(args)."""
    breaches = []
    description = getattr(module, "DESCRIPTION", None)
    if not isinstance(description, str) or not description or "\n" in description:
        breaches.append(f"{name}: DESCRIPTION must be one non-empty line")
    if not callable(getattr(module, "run", None)):
        breaches.append(f"{name}: no run(args) function")
    return breaches


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        return ""


def _cpu_ticks() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of the whole machine so far, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


def run_area(name: str, args: list[str], out: Path | None = None) -> Path:
    if name not in areas():
        raise SystemExit(f"benchmarks: no area {name!r}; areas: {', '.join(areas())}")
    module = importlib.import_module(f"benchmarks.areas.{name}")
    # The code that runs is the code at the start: take commit and state before the area runs.
    commit, dirty = _git("rev-parse", "--short", "HEAD"), bool(_git("status", "--porcelain", "--untracked-files=no"))
    started = datetime.now(timezone.utc)
    load_before = os.getloadavg()
    busy_before, steal_before = _cpu_ticks()
    t0 = time.monotonic()
    results = module.run(args)
    wall = time.monotonic() - t0
    busy_after, steal_after = _cpu_ticks()
    record = {
        "area": name,
        "command": "python -m benchmarks run " + shlex.join([name, *args]),
        "commit": commit,
        "dirty": dirty,
        "machine": machine(),
        "load": {"loadavg_before": [round(x, 2) for x in load_before],
                 "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                 "busy_cores": round((busy_after - busy_before) / wall, 2) if wall > 0 else 0.0,
                 "steal_cores": round((steal_after - steal_before) / wall, 2) if wall > 0 else 0.0},
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(wall, 1),
        "results": results,
    }
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="the areas and what each measures")
    run = sub.add_parser("run", help="run one area and write benchmarks/results/AREA.json")
    run.add_argument("area")
    run.add_argument("--out", type=Path, help="write the results here instead (a bare file name: in benchmarks/results)")
    args, rest = parser.parse_known_args(argv)
    # Measure the code's own defaults, not this machine's site config (/etc/hpcpredict): every
    # daemon and CLI the areas start inherits this (the site area's guide test sets its own).
    os.environ.setdefault("HPCPREDICT_CONFIG_PATH", "")
    if args.command == "list":
        breaches = []
        for name in areas():
            module = importlib.import_module(f"benchmarks.areas.{name}")
            breaches += contract_breaches(name, module)
            print(f"{name:12s} {getattr(module, 'DESCRIPTION', '')}")
        for breach in breaches:
            print(f"benchmarks: {breach}", file=sys.stderr)
        return 1 if breaches else 0
    out = RESULTS / args.out if args.out is not None and args.out.parent == Path() else args.out
    path = run_area(args.area, rest, out)
    record = json.loads(path.read_text())
    headline = record["results"].get("headline") if isinstance(record["results"], dict) else None
    if headline is not None:
        print(json.dumps({"area": record["area"], "headline": headline, "load": record["load"]}, indent=1))
    print(f"benchmarks: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
