"""GROMACS start-up cost per PME grid: CPU seconds of ``mdrun -nsteps 0`` in the sweep's environment.

A short GROMACS run is mostly start-up, and with PME the start-up is mostly FFTW planning the
parallel 3-D FFT of the PME grid (FFTW_MEASURE: ``mdrun -reprod``, which plans with
FFTW_ESTIMATE, takes a 2-rank start-up at grid 24 from 0.83 to 0.21 s). Its cost follows the
grid edge GROMACS picks (``calcgrid``: the first accepted FFT length n with box / n ≤
fourierspacing) and is not monotone in it: measured here, 2 ranks, 24 → 0.78 s, 25 → 0.27 s,
28 → 0.44 s, 32 → 0.48 s. That is a property of the code build and the machine, not a rule
computable from the inputs, so it is measured once (as a site would) and declared to the model
as a table (``startup_s`` in ``applications.gromacs.STARTUP_DERIVED``: evaluated, not declared).

For each grid edge (and reaction-field, which has no grid) and process count: a water box whose
edge makes GROMACS pick that grid (checked against ``fourier-nx`` in md.log), built as the sweep
builds it (no minimisation: nothing is integrated), rc 0.9 nm, then ``--reps`` runs of
``mpirun -np RANKS gmx_mpi mdrun -nsteps 0`` pinned to ``--cpu`` with the sweep's MPI
environment; the median CPU seconds of the process tree (``os.wait4``) is recorded.

    nice -n 19 python -m benchmarks.runtime.gromacs_startup --reps 3 --cpu 1 --out tests/data/runtime/gromacs_startup.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from benchmarks.machine import machine
from benchmarks.runtime import sweep_gromacs
from benchmarks.runtime.sweep import ENVIRONMENT, mpirun, package_version

GRIDS = [20, 24, 25, 28, 32, 36, 40, 42, 44, 48]   # the PME lengths GROMACS accepts for boxes 2.3-5.8 nm (not 45)
SPACING_NM = 0.12                                     # GROMACS's default fourierspacing (the sweep keeps it)


def box_for_grid(grid: int) -> float:
    """A box edge (nm, two decimals) for which GROMACS picks ``grid``: just below grid × spacing."""
    return round(grid * SPACING_NM - 0.01, 2)


def build(folder: Path, box: float, coulomb: str) -> None:
    def run(command):
        subprocess.run(command, cwd=folder, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run(["gmx", "solvate", "-cs", "spc216.gro", "-box", str(box), str(box), str(box), "-o", "conf.gro"])
    n_atoms = int((folder / "conf.gro").read_text().splitlines()[1])
    (folder / "topol.top").write_text(sweep_gromacs.TOPOLOGY.format(n_water=n_atoms // 3))
    pme = coulomb == "pme"
    (folder / "md.mdp").write_text(sweep_gromacs.MDP.format(
        nsteps=0, rc_nm=0.9, coulombtype="PME" if pme else "Reaction-Field", epsilon_rf="" if pme else "epsilon-rf = 0\n"))
    run(["gmx", "grompp", "-f", "md.mdp", "-c", "conf.gro", "-p", "topol.top", "-o", "md.tpr", "-maxwarn", "3"])


def cpu_seconds(folder: Path, ranks: int, cpu: str) -> float:
    command = ["taskset", "-c", cpu] + mpirun(ranks, ["gmx_mpi", "mdrun", "-s", "md.tpr", "-deffnm", "md", "-ntomp", "1",
                                                      "-pin", "off", "-notunepme", "-nb", "cpu", "-noconfout", "-nsteps", "0"])
    process = subprocess.Popen(command, cwd=folder, env=ENVIRONMENT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or "Finished mdrun" not in (folder / "md.log").read_text(errors="replace"):
        raise RuntimeError(f"mdrun -nsteps 0 failed in {folder}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cpu", default="1")
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    ranks_list = [int(r) for r in args.ranks.split(",")]
    cases = [("pme", grid) for grid in GRIDS] + [("rf", 32)]
    runs, table = [], {"pme": {}, "rf": {}}
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with tempfile.TemporaryDirectory(prefix="gromacs-startup-") as tmp:
        for coulomb, grid in cases:
            box = box_for_grid(grid)
            folder = Path(tmp) / f"{coulomb}_{grid}"
            folder.mkdir()
            build(folder, box, coulomb)
            for ranks in ranks_list:
                seconds = []
                for rep in range(args.reps):   # repetitions of one case back to back: the planner's cost, not drift
                    seconds.append(round(cpu_seconds(folder, ranks, args.cpu), 4))
                    runs.append({"coulomb": coulomb, "box_nm": box, "ranks": ranks, "rep": rep, "cpu_s": seconds[-1],
                                 "load1": round(os.getloadavg()[0], 2)})
                log = (folder / "md.log").read_text(errors="replace")
                picked = re.search(r"fourier-nx\s*=\s*(\d+)", log)
                if coulomb == "pme":
                    if not picked or int(picked.group(1)) != grid:
                        raise RuntimeError(f"box {box}: GROMACS picked grid {picked and picked.group(1)}, not {grid}")
                    table["pme"].setdefault(str(ranks), {})[str(grid)] = round(statistics.median(seconds), 3)
                else:
                    table["rf"][str(ranks)] = round(statistics.median(seconds), 3)
                print(coulomb, grid, box, ranks, seconds, flush=True)
    provenance = {
        "what": "median CPU seconds (user+system, process tree) of mdrun -nsteps 0: GROMACS start-up per PME grid edge "
                "(pme) or without a grid (rf), per MPI rank count, in the sweep's environment",
        "package_version": package_version("gromacs"), "program_version": sweep_gromacs.version(),
        "command": "mpirun -np RANKS gmx_mpi mdrun -s md.tpr -deffnm md -ntomp 1 -pin off -notunepme -nb cpu -noconfout "
                   "-nsteps 0 (taskset -c CPU; water box of edge grid*0.12-0.01 nm from gmx solvate, rc 0.9 nm)",
        "arguments": vars(args) | {"out": str(args.out)}, "nice": os.nice(0), "machine": machine(),
        "started_utc": started, "finished_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "startup_cpu_s": table, "runs": runs,
    }
    args.out.write_text(json.dumps(provenance, indent=1) + "\n")


if __name__ == "__main__":
    main()
