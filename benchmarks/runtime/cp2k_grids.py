"""CP2K's real-space grids, all levels: the points per edge CP2K picks for each (box edge, cutoff).

Quickstep collocates the density on NGRIDS = 4 grids (CP2K's default, the sweep's input), of
cutoffs E, E/3, E/9 and E/27 (progression factor 3): each product of Gaussians goes to the
coarsest grid fine enough for it (REL_CUTOFF 40), so the coarse grids hold much of the
collocation and integration, and each grid is Fourier-transformed. Each level's points per edge
follow the rule of the finest (``applications.cp2k.FFT_LENGTHS``): the first length CP2K accepts that
is ≥ 2·⌊a·√E_k/2π⌋ + 1, with the coarse levels reaching down to lengths 8-32. This probe
records what CP2K printed ("PW_GRID| Bounds") for the 55 (edge, cutoff) pairs of the sweeps.

One water, SZV, ``MAX_SCF 1``, ``PRINT_LEVEL MEDIUM``, the sweep's input otherwise, 1 rank,
pinned to ``--cpu`` in the sweep's MPI environment.

    nice -n 10 python -m benchmarks.runtime.cp2k_grids --cpu 1 --out tests/data/runtime/cp2k_multigrid.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.machine import machine
from benchmarks.runtime import sweep_cp2k
from benchmarks.runtime.cp2k_basis import run
from benchmarks.runtime.sweep import package_version

EDGES = [6.0 + 0.25 * i for i in range(11)]   # 6-8.5 Å: both designs of the sweep
CUTOFFS = range(100, 201, 25)


def grid_points(config: dict, folder: Path, cpu: str) -> list[int]:
    """Points per edge of each grid level, finest first, as CP2K printed them."""
    output = run(config, folder, cpu, print_level="MEDIUM")
    points = [int(n) for n in re.findall(r"PW_GRID\|\s+Bounds\s+1\s+-?\d+\s+-?\d+\s+Points:\s+(\d+)", output)]
    if len(points) != 4:
        raise RuntimeError(f"CP2K printed {len(points)} grids for {config} in {folder}")
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", default="1")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    printed = {}
    with tempfile.TemporaryDirectory(prefix="cp2k-grids-") as tmp:
        for cutoff in CUTOFFS:
            for edge in EDGES:
                config = {"n_water": 1, "box_a": edge, "cutoff_ry": cutoff, "basis": "SZV", "ranks": 1}
                printed[f"{edge},{cutoff}"] = grid_points(config, Path(tmp), args.cpu)
                print(edge, cutoff, printed[f"{edge},{cutoff}"], flush=True)
    provenance = {
        "source": "CP2K's \"PW_GRID| Bounds\" (points along edge 1) of every grid level, finest first, for the sweep's "
                  "input of benchmarks/runtime/sweep_cp2k.py with one water, SZV, MAX_SCF 1, PRINT_LEVEL MEDIUM, 1 rank",
        "package_version": package_version("cp2k"), "program_version": sweep_cp2k.version(),
        "command": "python -m benchmarks.runtime.cp2k_grids " + " ".join(f"--{k} {v}" for k, v in vars(args).items()),
        "nice": os.nice(0), "machine": machine(), "started_utc": started,
        "finished_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "grid_points_per_edge": printed,
    }
    args.out.write_text(json.dumps(provenance, indent=1) + "\n")


if __name__ == "__main__":
    main()
