"""CP2K's own counts for the sweep's bases: functions per water, basis radii, neighbour-list pairs.

CP2K's Quickstep cost per SCF step is mostly collocating the density on the real-space grids
and integrating the potential back (``grid_collocate_task_list``, ``grid_integrate_task_list``:
2.8 of 3.8 s of one water, DZVP, 150 Ry, 7 Å), and both loop over the pairs of atoms whose
basis functions overlap, periodic images included: its neighbour list. The MOLOPT functions
reach far (the orbital basis radius of H in DZVP is 10.1 Å), so even one water in a 7 Å box has
~440 pairs, and their number grows as the molecules squared over the box volume. This probe
records, for each basis of the sweep, what CP2K printed for one water (functions, shells,
primitive Gaussians, the orbital basis radius of each kind) and the neighbour-list totals
("DISTRIBUTION OF THE NEIGHBOR LISTS": particle pairs, matrix elements) for 1-3 waters in boxes
across the sweep's range, which checks the rule the sweep declares (``applications.cp2k.DERIVED``).

One rank, ``MAX_SCF 1``, ``PRINT_LEVEL HIGH``, the sweep's input otherwise (cutoff 100 Ry: the
neighbour list does not depend on it), pinned to ``--cpu`` in the sweep's MPI environment.

    nice -n 10 python -m benchmarks.runtime.cp2k_basis --cpu 1 --out tests/data/runtime/cp2k_basis.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.machine import machine
from benchmarks.runtime import sweep_cp2k
from benchmarks.runtime.sweep import ENVIRONMENT, package_version

BASES = ["SZV", "DZVP", "TZVP"]
BOXES = [6.0, 7.25, 8.5]
TOTALS = {"shells": "Shells", "primitive_cartesian_functions": "Primitive Cartesian functions",
          "cartesian_functions": "Cartesian basis functions", "spherical_functions": "Spherical basis functions"}


def run(config: dict, folder: Path, cpu: str, print_level: str = "HIGH") -> str:
    """CP2K's output for the sweep's input of ``config``, one SCF step, at ``print_level``."""
    command = ["taskset", "-c", cpu] + sweep_cp2k.prepare(config, folder)
    text = (folder / "water.inp").read_text()
    (folder / "water.inp").write_text(text.replace("PRINT_LEVEL LOW", f"PRINT_LEVEL {print_level}")
                                      .replace("MAX_SCF 50", "MAX_SCF 1"))
    subprocess.run(command, cwd=folder, env=ENVIRONMENT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not sweep_cp2k.completed(folder):
        raise RuntimeError(f"CP2K did not finish {config} in {folder}")
    return (folder / "water.out").read_text(errors="replace")


def printed_number(output: str, label: str) -> float:
    match = re.search(rf"{re.escape(label)}:\s+([0-9.]+)", output)
    if not match:
        raise RuntimeError(f"CP2K printed no {label!r}")
    return float(match.group(1))


def orbital_radii(output: str) -> dict[str, float]:
    """Kind label -> orbital basis radius (Å), from ``RADII: ORBITAL BASIS in angstrom``."""
    block = output.split("RADII: ORBITAL BASIS in angstrom", 1)[1].split("\n\n", 1)[0]
    return {label: float(radius) for label, radius in re.findall(r"^\s+\d+\s+(\w+)\s+([0-9.]+)", block, re.M)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", default="1")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    per_water, neighbour_lists = {}, []
    with tempfile.TemporaryDirectory(prefix="cp2k-basis-") as tmp:
        for basis in BASES:
            for n_water in (1, 2, 3):
                for box_a in BOXES:
                    config = {"n_water": n_water, "box_a": box_a, "cutoff_ry": 100, "basis": basis, "ranks": 1}
                    output = run(config, Path(tmp), args.cpu)
                    if n_water == 1 and box_a == BOXES[0]:
                        per_water[basis] = {key: int(printed_number(output, f"- {label}")) for key, label in TOTALS.items()}
                        per_water[basis]["orbital_radius_a"] = orbital_radii(output)
                    neighbour_lists.append(dict(config, particle_pairs=int(printed_number(output, "Total number of particle pairs")),
                                                matrix_elements=int(printed_number(output, "Total number of matrix elements"))))
                    print(neighbour_lists[-1], flush=True)
    provenance = {
        "source": "CP2K's printed totals (\"Total number of - ...\" for the whole system, \"RADII: ORBITAL BASIS in "
                  "angstrom\", \"DISTRIBUTION OF THE NEIGHBOR LISTS\") for the sweep's input of "
                  "benchmarks/runtime/sweep_cp2k.py with PRINT_LEVEL HIGH, MAX_SCF 1, cutoff 100 Ry, 1 rank",
        "package_version": package_version("cp2k"), "program_version": sweep_cp2k.version(),
        "command": "python -m benchmarks.runtime.cp2k_basis " + " ".join(f"--{k} {v}" for k, v in vars(args).items()),
        "nice": os.nice(0), "machine": machine(), "started_utc": started,
        "finished_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "per_water": per_water, "neighbour_lists": neighbour_lists,
    }
    args.out.write_text(json.dumps(provenance, indent=1) + "\n")


if __name__ == "__main__":
    main()
