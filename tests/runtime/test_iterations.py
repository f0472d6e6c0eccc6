"""SCF iteration counts of CP2K and NWChem: the parsers on the codes' real output, the sweep
harness's ``_iterations`` column from a real run, and the recorded counts against the sweeps."""
import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.runtime import sweep, sweep_cp2k, sweep_nwchem

DATA = Path(__file__).parent.parent / "data" / "runtime"
OUTPUT = DATA / "scf_output"   # excerpts of real reports (SOURCES.md, "SCF iteration counts")


def test_cp2k_steps_from_its_report():
    assert sweep_cp2k.scf_steps((OUTPUT / "cp2k_converged.out").read_text()) == 12
    # MAX_SCF 4: CP2K says "SCF run NOT converged": the count would be the cap, not the configuration's.
    assert sweep_cp2k.scf_steps((OUTPUT / "cp2k_not_converged.out").read_text()) is None
    assert sweep_cp2k.scf_steps("") is None


@pytest.mark.parametrize("method, converged", [("dft", 6), ("scf", 5)])
def test_nwchem_iterations_from_its_report(method, converged):
    assert sweep_nwchem.scf_iterations((OUTPUT / f"nwchem_{method}_converged.out").read_text()) == converged
    # maxiter 2: NWChem stops with "Calculation failed to converge" after its 2 iterations.
    assert sweep_nwchem.scf_iterations((OUTPUT / f"nwchem_{method}_not_converged.out").read_text()) is None


def test_nwchem_dft_table_is_not_read_as_scf():
    """The DFT rows carry their iteration number after "d= 0,ls=0.0,diis"; the SCF pattern alone
    must not take the DFT table's other numbers for iterations."""
    dft = (OUTPUT / "nwchem_dft_converged.out").read_text()
    assert not sweep_nwchem.SCF_ITERATION.findall(dft)
    assert not sweep_nwchem.DFT_ITERATION.findall((OUTPUT / "nwchem_scf_converged.out").read_text())


@pytest.mark.skipif(shutil.which("nwchem") is None or shutil.which("mpirun") is None, reason="needs NWChem and Open MPI")
def test_sweep_run_writes_the_iterations_nwchem_reported(tmp_path):
    """A real run through the harness: ``_iterations`` is the count in the report it kept."""
    config = {"config": 0, "n_water": 1, "basis": "sto-3g", "method": "scf", "ranks": 1}
    cpus = ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(0)))   # the CPUs the test may use
    row = sweep.run_once(sweep_nwchem, config, tmp_path, timeout_s=120, cpu=cpus)
    assert row is not None
    report = (tmp_path / sweep_nwchem.STDOUT).read_text()
    assert "Total SCF energy" in report
    assert row["_iterations"] == sweep_nwchem.scf_iterations(report) and 2 <= row["_iterations"] <= 50


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


@pytest.mark.parametrize("code", ["cp2k", "nwchem", "lammps"])
def test_iterations_area_adds_the_count_to_the_runtime_areas_table(code):
    """The area scores the runtime area's table (same runs, derived inputs, configurations, so the
    same splits) with one more input, each run's configuration's recorded count."""
    from benchmarks.areas import iterations

    count = iterations.CODES[code]
    without, with_count = iterations.tables(code)
    assert with_count.inputs == without.inputs[:len(without.inputs) - len(without.derived.names)] \
        + [count.name] + without.derived.names
    assert (with_count.groups == without.groups).all() and (with_count.y == without.y).all()
    if count.source.endswith(".json"):
        recorded = json.loads((DATA / count.source).read_text())["iterations"]
    else:   # a column of another sweep of the same configurations (its first run of each)
        with (DATA / count.source).open(newline="") as handle:
            recorded = {}
            for row in csv.DictReader(handle):
                recorded.setdefault(row["config"], int(float(row[count.name])))
    with (DATA / count.sweep).open(newline="") as handle:
        configs = [row["config"] for row in csv.DictReader(handle)]
    assert [row[count.name] for row in with_count.rows] == [float(recorded[c]) for c in configs]
    # The count is the configuration's: every run of a configuration carries the same.
    for group in set(with_count.groups.tolist()):
        assert len({with_count.rows[i][count.name] for i in (with_count.groups == group).nonzero()[0]}) == 1
