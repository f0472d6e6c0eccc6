"""GROMACS (Debian `gromacs`): MD of an SPC water box built with `gmx solvate` from the bundled spc216.gro.

Inputs: cubic box edge ``box_nm``, ``nsteps`` (2 fs steps), cut-off ``rc_nm`` (Coulomb and vdW),
electrostatics ``coulomb`` (PME or reaction-field), MPI ranks ``ranks`` (1 or 2, one OpenMP
thread each) of the Open MPI build ``gmx_mpi`` (shipped in the same Debian package) under
``mpirun``: its waiting ranks yield like the other codes' (the sweep's ``mpi_yield_when_idle``),
a parameter that does not reach the thread-MPI build ``gmx``, whose ranks are threads. Untimed before the timed `gmx mdrun`: 200 steps of steepest-descent
minimisation (a tiled spc216 box has bad contacts at the tile faces: without it, larger boxes
crash in SETTLE) and `gmx grompp`. A run counts only when md.log says "Finished mdrun": without
the minimisation some runs stopped early with exit status 0 (0.2 s for 800 steps of 3900 atoms);
the rows made before both fixes were removed and run again.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks.runtime.sweep import mpirun, report_ends_with
from hpcpredict.daemon.lab.runtime.applications.gromacs import DERIVED  # recorded with the sweep (DERIVED)

PACKAGE = "gromacs"
INPUTS = ["box_nm", "nsteps", "rc_nm", "coulomb", "ranks"]
RANGES = {"box_nm": "2.6-3.6 by 0.1", "nsteps": "100-1000 by 100", "rc_nm": "0.8-1.2 by 0.05",
          "coulomb": "pme|rf", "ranks": "1|2"}
COMMAND = ("mpirun -np RANKS gmx_mpi mdrun -s md.tpr -deffnm md -ntomp 1 -pin off -notunepme -nb cpu -noconfout "
           "(after gmx solvate -cs spc216.gro -box B B B; grompp + mdrun of em.mdp (steep, 200 steps); "
           "gmx grompp -f md.mdp -c em.gro -p topol.top)")


MDP = """integrator = md
dt = 0.002
nsteps = {nsteps}
cutoff-scheme = Verlet
coulombtype = {coulombtype}
rcoulomb = {rc_nm}
rvdw = {rc_nm}
{epsilon_rf}tcoupl = v-rescale
tc-grps = System
tau-t = 0.1
ref-t = 300
gen-vel = yes
gen-temp = 300
gen-seed = 1
nstxout = 0
nstvout = 0
nstenergy = 0
nstlog = 0
nstcalcenergy = 100
"""

EM_MDP = """integrator = steep
nsteps = 200
cutoff-scheme = Verlet
coulombtype = Reaction-Field
epsilon-rf = 0
rcoulomb = {rc_nm}
rvdw = {rc_nm}
"""

TOPOLOGY = """#include "oplsaa.ff/forcefield.itp"
#include "oplsaa.ff/spc.itp"
[ system ]
water box
[ molecules ]
SOL {n_water}
"""


def draw_config(rng) -> dict:
    return {"box_nm": round(rng.randrange(26, 37) / 10, 1), "nsteps": rng.randrange(100, 1001, 100),
            "rc_nm": round(rng.randrange(16, 25) * 0.05, 2), "coulomb": rng.choice(["pme", "rf"]),
            "ranks": rng.choice([1, 2])}


def version() -> str:
    out = subprocess.run(["gmx", "--version"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("GROMACS version")), "")


def _run(command, folder):
    subprocess.run(command, cwd=folder, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def completed(folder: Path) -> bool:
    return report_ends_with(folder / "md.log", "Finished mdrun")


def prepare(config: dict, folder: Path) -> list[str]:
    (folder / "md.log").unlink(missing_ok=True)
    if not (folder / "md.tpr").exists():
        box = str(config["box_nm"])
        _run(["gmx", "solvate", "-cs", "spc216.gro", "-box", box, box, box, "-o", "conf.gro"], folder)
        n_atoms = int((folder / "conf.gro").read_text().splitlines()[1])
        (folder / "topol.top").write_text(TOPOLOGY.format(n_water=n_atoms // 3))
        pme = config["coulomb"] == "pme"
        (folder / "em.mdp").write_text(EM_MDP.format(rc_nm=config["rc_nm"]))
        _run(["gmx", "grompp", "-f", "em.mdp", "-c", "conf.gro", "-p", "topol.top", "-o", "em.tpr",
              "-maxwarn", "2"], folder)
        _run(["gmx", "mdrun", "-s", "em.tpr", "-deffnm", "em", "-ntmpi", "1", "-ntomp", "1", "-pin", "off"], folder)
        (folder / "md.mdp").write_text(MDP.format(
            nsteps=config["nsteps"], rc_nm=config["rc_nm"], coulombtype="PME" if pme else "Reaction-Field",
            epsilon_rf="" if pme else "epsilon-rf = 0\n"))
        _run(["gmx", "grompp", "-f", "md.mdp", "-c", "em.gro", "-p", "topol.top", "-o", "md.tpr",
              "-maxwarn", "2"], folder)
    return mpirun(config["ranks"], ["gmx_mpi", "mdrun", "-s", "md.tpr", "-deffnm", "md", "-ntomp", "1",
                                    "-pin", "off", "-notunepme", "-nb", "cpu", "-noconfout"])
