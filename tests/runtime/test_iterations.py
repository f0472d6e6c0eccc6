"""SCF iteration counts of CP2K and NWChem: the parsers on the codes' real output and the
recorded counts against the sweeps (the sweep harness that writes them is benchmark code, which tests do not import)."""
import csv
import json
from pathlib import Path

import pytest

from hpcpredict.daemon.lab.runtime.applications import cp2k, nwchem

DATA = Path(__file__).parent.parent / "data" / "runtime"
OUTPUT = DATA / "scf_output"   # excerpts of real reports (SOURCES.md, "SCF iteration counts")


def test_cp2k_steps_from_its_report():
    assert cp2k.scf_steps((OUTPUT / "cp2k_converged.out").read_text()) == 12
    # MAX_SCF 4: CP2K says "SCF run NOT converged": the count would be the cap, not the configuration's.
    assert cp2k.scf_steps((OUTPUT / "cp2k_not_converged.out").read_text()) is None
    assert cp2k.scf_steps("") is None


@pytest.mark.parametrize("method, converged", [("dft", 6), ("scf", 5)])
def test_nwchem_iterations_from_its_report(method, converged):
    assert nwchem.scf_iterations((OUTPUT / f"nwchem_{method}_converged.out").read_text()) == converged
    # maxiter 2: NWChem stops with "Calculation failed to converge" after its 2 iterations.
    assert nwchem.scf_iterations((OUTPUT / f"nwchem_{method}_not_converged.out").read_text()) is None


def test_nwchem_dft_table_is_not_read_as_scf():
    """The DFT rows carry their iteration number after "d= 0,ls=0.0,diis"; the SCF pattern alone
    must not take the DFT table's other numbers for iterations."""
    dft = (OUTPUT / "nwchem_dft_converged.out").read_text()
    assert not nwchem.SCF_ITERATION.findall(dft)
    assert not nwchem.DFT_ITERATION.findall((OUTPUT / "nwchem_scf_converged.out").read_text())


@pytest.mark.parametrize("code", ["cp2k", "nwchem"])
def test_recorded_counts_cover_the_sweep_with_provenance(code):
    recorded = json.loads((DATA / f"{code}_iterations.json").read_text())
    with (DATA / f"{code}_water.csv").open(newline="") as handle:
        configs = {row["config"] for row in csv.DictReader(handle)}
    assert set(recorded["iterations"]) == configs
    assert all(isinstance(n, int) and 1 <= n < 50 for n in recorded["iterations"].values())  # converged below the cap
    provenance = recorded["provenance"]
    assert provenance["package_version"] not in ("", "unknown") and provenance["machine"]["cores"]
    sweep_meta = json.loads((DATA / f"{code}_water.json").read_text())
    assert provenance["package_version"] == sweep_meta["package_version"]
    # The probe drew the sweep's configurations: each of the sweep's passes (seed, design, first
    # configuration, number drawn) is one or more probe passes (split by --only) with its arguments.
    passes = [sweep_meta["arguments"]] + [p["arguments"] for p in sweep_meta.get("resumed_passes", [])]
    for arguments in passes:
        flags = [f"--{key.replace('_', '-')} {arguments[key]}" for key in ("seed", "configs", "first_config", "design")
                 if arguments[key] not in ("", 0)]
        assert any(all(flag + " " in command + " " for flag in flags) for command in provenance["commands"]), flags
    determinism = recorded["determinism"]
    assert determinism["configurations_run_twice"] >= 10 and determinism["with_2_ranks"] >= 1
    assert determinism["same_count"] == determinism["configurations_run_twice"], determinism["differing"]
    assert f"{code}_iterations.json" in (DATA / "SOURCES.md").read_text()
