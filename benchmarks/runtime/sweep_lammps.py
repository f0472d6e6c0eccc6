"""LAMMPS (Debian `lammps`): the Lennard-Jones melt of `in.melt`, serial `lmp`, as a code of the sweep harness.

The deck, inputs and configurations are those of `lammps_melt.csv` (`make_lammps_dataset.py`):
the configurations are drawn by its `draw_config`, so `--seed 6` gives that file's configurations
in its order. What differs is how a run is measured: `make_lammps_dataset.py` ran the passes on
a loaded machine, unpinned, reading LAMMPS' output live for runtime features; here a run is one
`lmp` process pinned to the sweep's CPU, its output going to a log file that `completed` reads
("Total wall time" is LAMMPS' last line: a run stopped by an error does not print it). No MPI
ranks: serial `lmp`, like the older file (no `ranks` input).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.runtime.make_lammps_dataset import DECK, INPUTS as MELT_INPUTS, draw_config as draw_melt
from benchmarks.runtime.sweep import report_ends_with
from hpcpredict.daemon.lab.runtime.applications.lammps import DERIVED  # recorded with the sweep (DERIVED)

PACKAGE = "lammps"
INPUTS = list(MELT_INPUTS)
RANGES = {"x": "4-10", "y": "4-10", "z": "4-10", "steps": "50-500 by 25", "cutoff": "2.0-3.2",
          "skin": "0.1-0.5", "temp": "0.5-3.0", "newton": "on|off"}
COMMAND = "lmp -nocite -screen none -log log.lammps -var KEY VALUE ... -in benchmarks/runtime/in.melt"


def draw_config(rng) -> dict:
    """make_lammps_dataset's draw, without its configuration id (the harness numbers configurations)."""
    config = draw_melt(rng, 0)
    del config["config"]
    return config


def version() -> str:
    out = subprocess.run(["lmp", "-h"], capture_output=True, text=True).stdout
    return next((line.split(" - ", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Large-scale Atomic/Molecular")), "")


def completed(folder: Path) -> bool:
    return report_ends_with(folder / "log.lammps", "Total wall time", tail_chars=2000)


def prepare(config: dict, folder: Path) -> list[str]:
    (folder / "log.lammps").unlink(missing_ok=True)
    command = ["lmp", "-nocite", "-screen", "none", "-log", "log.lammps"]
    for key in INPUTS:
        command += ["-var", key, str(config[key])]
    return command + ["-in", str(DECK)]
