"""Sweep a real application (Debian package) over its inputs and process counts, with repetitions.

    nice -n 10 python -m benchmarks.runtime.sweep gromacs --configs 60 --reps 3 --budget-s 900 \
        --out tests/data/runtime/gromacs_water.csv

Codes (each a module beside this file with ``INPUTS``, ``draw_config(rng)``, optionally ``DESIGNS``
(other draws, ``--design``) and ``DERIVED`` (``[[name, expression], ...]``: quantities the code's
cost follows, computed from the inputs as ``train-runtime --derive`` does; written to the JSON),
``prepare(config, folder) -> command``, ``version()`` and optionally ``completed(folder)``,
which checks the code's own output: an exit status 0 alone is not trusted, ``iterations(folder)
-> int | None``, the SCF steps the code reported, written as the annotation ``_iterations`` (not
an input: no input states it), and ``STDOUT``, the file in the run's folder the code's standard
output goes to where the code writes its report there): ``gromacs`` (water box MD),
``cp2k`` (Quickstep DFT of water molecules), ``nwchem`` (SCF/DFT of water clusters), ``lammps``
(Lennard-Jones melt, serial ``lmp``, the deck ``in.melt``). Every input
file is generated here from the inputs (the codes' own bundled force fields, basis sets and
pseudopotentials; nothing is downloaded).

Repetitions are interleaved within blocks of ``--block`` configurations (each configuration of
the block once, then again...), so drift of the shared machine shows as noise between
repetitions, not as a difference between configurations, while a sweep stopped by its time
budget still leaves every finished block with all its repetitions. A block of all the
configurations (``--block`` ≥ ``--configs``) makes each repetition a pass over the whole sweep,
so repetitions of a configuration are a pass apart and their disagreement includes the machine's
drift over the sweep, which a model trained on some runs and asked about others faces too.
``--resume`` appends to an existing CSV and skips the (configuration, repetition) pairs it already has.

Target ``runtime_s``: CPU seconds (user + system) of the whole process tree (``os.wait4`` on the
launcher reaps every rank), i.e. core-seconds, what Slurm's accounting calls TotalCPU, measured
so that it counts the code's work and not its neighbours': every run is pinned to one CPU
(``taskset -c --cpu``: all ranks share it) and OpenMPI's waiting ranks yield the processor
(``mpi_yield_when_idle``). A rank waiting for a message then hands the core to the rank it waits
for instead of spinning on a core of its own, so busy-waiting, which on this shared 2-core
machine used to be 30-60 % of a 2-rank run's CPU time and varied with the neighbours' load, is
reduced to the cost of the yields. What remains in a 2-rank run besides the computation is the
code's parallel overhead (communication, duplicated work) and those yields. Wall time is kept
as ``_wall_s``: on this machine it measures the neighbours more than the code. ``_load1`` is
the 1-minute load average just before the run, ``_utc`` its start. ``<out>.json`` beside the
CSV records the package version, the command template, the machine and the sweep's arguments.
"""
from __future__ import annotations

import argparse
import csv
import importlib
import json
import os
from benchmarks.machine import machine
import random
import shlex
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

CODES = ("gromacs", "cp2k", "nwchem", "lammps")
# mpi_yield_when_idle: a rank waiting in MPI calls sched_yield in its progress loop (Open MPI 4.1;
# `ompi_info --all | grep yield`), which, with all ranks pinned to one CPU, runs the rank it waits for.
ENVIRONMENT = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_btl_vader_single_copy_mechanism="none",
                   OMPI_MCA_mpi_yield_when_idle="1",
                   OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def mpirun(np_: int, command: list[str]) -> list[str]:
    """OpenMPI launcher: no binding of its own (the sweep pins the whole run to one CPU), oversubscription allowed."""
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(np_)] + command


def report_ends_with(report: Path, marker: str, tail_chars: int = 4000) -> bool:
    """Whether ``marker`` is in the last ``tail_chars`` characters of a code's report: the line a
    code prints only when it finishes (a run stopped by an error does not), for ``completed``."""
    try:
        return marker in report.read_text(errors="replace")[-tail_chars:]
    except OSError:
        return False


def package_version(package: str) -> str:
    result = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def run_once(code, config: dict, folder: Path, timeout_s: float, cpu: str) -> dict | None:
    command = ["taskset", "-c", cpu] + code.prepare(config, folder)
    load1 = os.getloadavg()[0]
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    start = time.time()
    stdout_name = getattr(code, "STDOUT", None)
    stdout = (folder / stdout_name).open("wb") if stdout_name else subprocess.DEVNULL
    try:
        process = subprocess.Popen(command, cwd=folder, env=ENVIRONMENT, stdout=stdout,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
    finally:
        if stdout_name:
            stdout.close()
    deadline = start + timeout_s
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.time() > deadline:
            os.killpg(process.pid, 9)
            os.wait4(process.pid, 0)
            print(f"timeout: {shlex.join(command)}", file=sys.stderr)
            return None
        time.sleep(0.02)
    process.returncode = os.waitstatus_to_exitcode(status)
    completed = getattr(code, "completed", lambda folder: True)(folder)
    if process.returncode != 0 or not completed:
        print(f"failed ({process.returncode}, completed: {completed}): {shlex.join(command)} in {folder}",
              file=sys.stderr)
        return None
    row = dict(config, runtime_s=round(usage.ru_utime + usage.ru_stime, 4),
               _wall_s=round(time.time() - start, 4), _load1=round(load1, 2), _utc=started)
    if hasattr(code, "iterations"):
        row["_iterations"] = code.iterations(folder)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("code", choices=CODES)
    parser.add_argument("--configs", type=int, default=60)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--budget-s", type=float, default=900.0)
    parser.add_argument("--timeout-s", type=float, default=120.0, help="a run longer than this is dropped")
    parser.add_argument("--cpu", default="0", help="the CPU every rank of every run is pinned to (taskset -c)")
    parser.add_argument("--block", type=int, default=10, help="configurations whose repetitions interleave")
    parser.add_argument("--resume", action="store_true", help="append to --out, skipping runs it has")
    parser.add_argument("--design", default="", metavar="NAME",
                        help="draw configurations with the code module's DESIGNS[NAME] instead of draw_config")
    parser.add_argument("--first-config", type=int, default=0, metavar="ID",
                        help="number the drawn configurations from ID (a second design appended with --resume)")
    parser.add_argument("--only", default="", metavar="FIRST:END",
                        help="run only configurations FIRST..END-1 (a second sweep process in parallel)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    code = importlib.import_module(f"benchmarks.runtime.sweep_{args.code}")
    rng = random.Random(args.seed)
    draw = code.DESIGNS[args.design] if args.design else code.draw_config
    configs = [dict(config=args.first_config + i, **draw(rng)) for i in range(args.configs)]
    columns = ["config", "rep"] + code.INPUTS + ["runtime_s", "_wall_s", "_load1", "_utc"] \
        + (["_iterations"] if hasattr(code, "iterations") else [])
    provenance = {
        "code": args.code, "package": code.PACKAGE, "package_version": package_version(code.PACKAGE),
        "program_version": code.version(), "command_template": code.COMMAND, "inputs": code.INPUTS,
        "input_ranges": code.RANGES, "derived_inputs": getattr(code, "DERIVED", []), "machine": machine(),
        "arguments": vars(args) | {"out": str(args.out)},
        "nice": os.nice(0),
        "started_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": ("runtime_s: CPU seconds (user+system) of the whole process tree, from os.wait4; all ranks "
                   "pinned to one CPU (taskset -c CPU), Open MPI waiting ranks yield (OMPI_MCA_mpi_yield_when_idle=1)"),
        "environment": {k: v for k, v in ENVIRONMENT.items() if k.startswith(("OMP", "OMPI_MCA"))},
    }
    meta = args.out.with_suffix(".json")
    done = set()
    if args.resume and args.out.exists():
        with args.out.open() as existing:
            reader = csv.DictReader(existing)
            done = {(int(row["config"]), int(row["rep"])) for row in reader}
            # A CSV written before a column existed (``_iterations``) keeps its own header.
            if done:
                columns = [column for column in columns if column in reader.fieldnames]
        if meta.exists():
            # Every pass that appended is listed, so a CSV grown by several designs says how.
            earlier = json.loads(meta.read_text())
            passes = earlier.get("resumed_passes", [])
            if "resumed_utc" in earlier:
                passes.append({"utc": earlier.pop("resumed_utc"), "arguments": earlier.pop("resume_arguments"),
                               "nice": earlier.pop("resume_nice", None)})
            passes.append({"utc": provenance["started_utc"], "arguments": provenance["arguments"],
                           "nice": provenance["nice"]})
            provenance = earlier | {"resumed_passes": passes, "derived_inputs": getattr(code, "DERIVED", [])}
    if args.only:
        first, end = (int(part) for part in args.only.split(":"))
        configs = [config for config in configs if first <= config["config"] < end]
    order = [(config, rep) for start in range(0, len(configs), args.block) for rep in range(args.reps)
             for config in configs[start:start + args.block] if (config["config"], rep) not in done]
    deadline = time.time() + args.budget_s
    runs = failures = 0
    # A flush per row: a sweep stopped by the budget still leaves a usable CSV.
    with args.out.open("a" if done else "w", newline="") as out, \
            tempfile.TemporaryDirectory(prefix=f"sweep-{args.code}-") as tmp:
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        if not done:
            writer.writeheader()
        for config, rep in order:
            if time.time() > deadline:
                break
            folder = Path(tmp) / f"c{config['config']}"
            folder.mkdir(exist_ok=True)
            row = run_once(code, config, folder, args.timeout_s, args.cpu)
            if row is None:
                failures += 1
                continue
            row["rep"] = rep
            writer.writerow(row)
            out.flush()
            runs += 1
    provenance.update(finished_utc=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                      runs=len(done) + runs, failed_runs=failures + provenance.get("failed_runs", 0))
    meta.write_text(json.dumps(provenance, indent=1) + "\n")
    print(f"{args.code}: {runs} runs, {failures} failed -> {args.out}")


if __name__ == "__main__":
    main()
