"""Build the real-program runtime dataset: LAMMPS (Debian `lammps`) Lennard-Jones melt runs.

Each configuration draws random inputs (box repetitions x/y/z, steps, cutoff, neighbour skin,
temperature, newton on/off) and is run `--reps` times, repetitions interleaved (all
configurations once, then again) so machine drift shows as noise, not as signal.

Runtime = CPU seconds (user + system) of the serial `lmp` process, from `os.wait4`. Why not
wall time: the development machine has 2 cores shared with other jobs (load 3-6 while this
ran), and wall time there measures the neighbours; on a dedicated HPC core, a serial run's
wall time equals its CPU time. Wall seconds are kept in `_wall_s` for reference (`_` columns are annotations, not inputs).

While LAMMPS runs, this wrapper reads its output live and reports runtime features through
the product's protocol (`hpcpredict.daemon.runtime.report.report`, appending to a features
file): `natoms` (after atom creation), `pe0` (potential energy at step 0), `cpu5` (LAMMPS'
own CPU seconds at step 5) and `neigh_builds` (only known at the end — time reduction must
drop it). Report times are the process's CPU seconds so far (from /proc/PID/stat), the same
clock as the runtime. The file is parsed back with `parse_feature_lines`; each feature gets a
`<name>@t` column.

    nice -n 10 python benchmarks/runtime/make_lammps_dataset.py --configs 200 --reps 3 \
        --budget-s 1080 --out tests/data/runtime/lammps_melt.csv

Transfer target ("new platform": the same runs with LAMMPS' OPT-package kernels, `-sf opt`):

    nice -n 10 python benchmarks/runtime/make_lammps_dataset.py --configs 120 --reps 1 \
        --suffix opt --budget-s 420 --out tests/data/runtime/lammps_melt_opt.csv
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

from hpcpredict.daemon.runtime.report import parse_feature_lines, report

DECK = Path(__file__).with_name("in.melt")
INPUTS = ["x", "y", "z", "steps", "cutoff", "skin", "temp", "newton"]
FEATURES = ["natoms", "pe0", "cpu5", "neigh_builds"]
COLUMNS = (["config", "rep"] + INPUTS + ["runtime_s", "_wall_s"]
           + [c for f in FEATURES for c in (f, f"{f}@t")])
TICKS = os.sysconf("SC_CLK_TCK")


def draw_config(rng: random.Random, index: int) -> dict:
    return {
        "config": index,
        "x": rng.randint(4, 10), "y": rng.randint(4, 10), "z": rng.randint(4, 10),
        "steps": rng.randrange(50, 501, 25),
        "cutoff": round(rng.uniform(2.0, 3.2), 2),
        "skin": round(rng.uniform(0.1, 0.5), 2),
        "temp": round(rng.uniform(0.5, 3.0), 2),
        "newton": rng.choice(["on", "off"]),
    }


def cpu_seconds(pid: int) -> float:
    """utime + stime of a running process (fields 14, 15 of /proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return float("nan")


def run_once(config: dict, features_file: str, suffix: str = "") -> dict:
    # stdbuf: LAMMPS output line-buffered, so features are reported when LAMMPS prints them.
    command = ["stdbuf", "-oL", "lmp", "-nocite", "-log", "none", "-in", str(DECK)]
    if suffix:  # another "platform": LAMMPS' accelerated styles (e.g. OPT package)
        command[-2:-2] = ["-sf", suffix]
    for key in INPUTS:
        command[-2:-2] = ["-var", key, str(config[key])]
    open(features_file, "w").close()
    start = time.time()
    in_thermo = False
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in process.stdout:
        now = cpu_seconds(process.pid)
        words = line.split()
        if line.startswith("Created") and "atoms" in line:
            report("natoms", int(words[1]), at_s=now, path=features_file)
        elif words[:1] == ["Step"]:
            in_thermo = True
        elif in_thermo and words and words[0].isdigit():
            step = int(words[0])
            if step == 0:
                report("pe0", float(words[2]), at_s=now, path=features_file)
            elif step == 5:
                report("cpu5", float(words[3]), at_s=now, path=features_file)
        elif line.startswith("Loop time"):
            in_thermo = False
        elif line.startswith("Neighbor list builds"):
            report("neigh_builds", int(words[-1]), at_s=now, path=features_file)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"LAMMPS failed ({process.returncode}): {' '.join(command)}")
    row = dict(config, runtime_s=round(usage.ru_utime + usage.ru_stime, 4),
               _wall_s=round(time.time() - start, 4))
    for feature in parse_feature_lines(Path(features_file).read_text()):
        row[feature.key] = feature.value
        row[f"{feature.key}@t"] = round(feature.at_s, 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--budget-s", type=float, default=1080.0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--suffix", default="", help="LAMMPS -sf style suffix (transfer target: opt)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    configs = [draw_config(rng, i) for i in range(args.configs)]
    deadline = time.time() + args.budget_s
    # A flush per row: a run stopped by the budget still leaves a usable CSV.
    with args.out.open("w", newline="") as out, tempfile.TemporaryDirectory() as tmp:
        writer = csv.DictWriter(out, fieldnames=COLUMNS)
        writer.writeheader()
        features_file = os.path.join(tmp, "features")
        for rep in range(args.reps):
            for config in configs:
                if time.time() > deadline:
                    print("time budget reached")
                    return
                row = run_once(config, features_file, args.suffix)
                row["rep"] = rep
                writer.writerow(row)
                out.flush()


if __name__ == "__main__":
    main()
