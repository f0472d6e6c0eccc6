"""The recorded sweeps of real codes (GROMACS, CP2K, NWChem, LAMMPS): usable run tables with provenance."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from hpcpredict.daemon.lab.runtime.dataset import read_runs_csv

DATA = Path(__file__).parent.parent / "data" / "runtime"
SWEEPS = {
    "gromacs_water": ["box_nm", "nsteps", "rc_nm", "coulomb", "ranks"],
    "cp2k_water": ["n_water", "box_a", "cutoff_ry", "basis", "ranks"],
    "nwchem_water": ["n_water", "basis", "method", "ranks"],
    "lammps_melt_quiet": ["x", "y", "z", "steps", "cutoff", "skin", "temp", "newton"],   # serial lmp
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_sweep_is_a_run_table_with_repetitions_and_provenance(name):
    table = read_runs_csv(DATA / f"{name}.csv", target="runtime_s")
    assert table.inputs == SWEEPS[name]
    counts = np.bincount(table.groups)
    assert (counts >= 3).sum() >= 8, counts        # repetitions: the noise floor is measurable
    if "ranks" in SWEEPS[name]:
        assert {row["ranks"] for row in table.rows} == {1.0, 2.0}   # both process counts swept
    provenance = json.loads((DATA / f"{name}.json").read_text())
    assert provenance["package_version"] not in ("", "unknown") and provenance["inputs"] == SWEEPS[name]
    assert provenance["machine"]["cores"] and provenance["runs"] == len(table.y)
    assert f"{name}.csv" in (DATA / "SOURCES.md").read_text()


def test_lammps_quiet_sweep_ran_the_configurations_of_the_loaded_one():
    """lammps_melt_quiet.csv re-measures lammps_melt.csv: every configuration id has the same
    inputs in both files (the sweep draws them with make_lammps_dataset's draw_config, seed 6),
    all 180 configurations are there, and each has its 3 repetitions, one per pass."""
    import csv

    def inputs_by_config(name):
        with (DATA / f"{name}.csv").open() as handle:
            rows = list(csv.DictReader(handle))
        by_config = {}
        for row in rows:
            values = tuple(float(row[key]) if key != "newton" else row[key] for key in SWEEPS["lammps_melt_quiet"])
            assert by_config.setdefault(int(row["config"]), values) == values, row   # one configuration, one input set
        return by_config, rows

    quiet, rows = inputs_by_config("lammps_melt_quiet")
    loaded, _ = inputs_by_config("lammps_melt")
    assert quiet == loaded and len(quiet) == 180
    assert sorted((int(row["config"]), int(row["rep"])) for row in rows) == [(c, r) for c in range(180) for r in range(3)]
    provenance = json.loads((DATA / "lammps_melt_quiet.json").read_text())
    assert provenance["arguments"]["seed"] == 6 and provenance["arguments"]["block"] >= 180   # a pass per repetition
    assert provenance["failed_runs"] == 0


def test_cp2k_declared_grid_is_the_grid_cp2k_printed():
    """The sweep's derived input ``fft_points`` against the finest grid CP2K itself chose for
    every (box edge, cutoff) pair of the sweeps (cp2k_grids.json, see SOURCES.md)."""
    from hpcpredict.daemon.lab.runtime.applications.cp2k import DERIVED
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    derived = DerivedInputs(DERIVED)
    printed = json.loads((DATA / "cp2k_grids.json").read_text())["finest_grid_points_per_edge"]
    assert len(printed) == 55
    for key, points in printed.items():
        box, cutoff = (float(part) for part in key.split(","))
        values = derived.apply({"box_a": box, "cutoff_ry": cutoff, "n_water": 2.0})
        assert values["fft_points"] == points ** 3, key
        assert values["water_density"] == pytest.approx(2.0 / box ** 3)
    # Declared in the provenance, as the benchmark reads it.
    assert json.loads((DATA / "cp2k_water.json").read_text())["derived_inputs"] == DERIVED


def test_cp2k_declared_multigrid_points_are_the_grids_cp2k_printed():
    """The sweep's derived input ``multigrid_points`` against the four grid levels CP2K itself
    chose (NGRIDS 4: cutoffs E, E/3, E/9, E/27) for every (box edge, cutoff) pair of the sweeps
    (cp2k_multigrid.json, see SOURCES.md): each level by the rule of the finest."""
    from hpcpredict.daemon.lab.runtime.applications.cp2k import DERIVED
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    derived = DerivedInputs(DERIVED)
    printed = json.loads((DATA / "cp2k_multigrid.json").read_text())["grid_points_per_edge"]
    finest = json.loads((DATA / "cp2k_grids.json").read_text())["finest_grid_points_per_edge"]
    assert sorted(printed) == sorted(finest) and len(printed) == 55
    for key, levels in printed.items():
        box, cutoff = (float(part) for part in key.split(","))
        assert len(levels) == 4 and levels[0] == finest[key] and levels == sorted(levels, reverse=True), key
        values = derived.apply({"box_a": box, "cutoff_ry": cutoff, "n_water": 1.0, "basis": "SZV", "ranks": 1.0})
        assert values["multigrid_points"] == sum(points ** 3 for points in levels), key


def test_cp2k_declared_neighbour_pairs_follow_the_pairs_cp2k_printed():
    """The sweep's derived input ``neighbour_pairs`` against CP2K's own "Total number of particle
    pairs" for 1-3 waters in 6, 7.25 and 8.5 Å boxes in every basis (cp2k_basis.json, see
    SOURCES.md), and its radii against the orbital basis radii CP2K printed. The rule counts
    pairs as a continuum (the radii exceed the box); where CP2K counted fewer than 100 pairs the
    lattice's discreteness shows more."""
    from hpcpredict.daemon.lab.runtime.applications.cp2k import DERIVED, ORBITAL_RADIUS_A
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    probe = json.loads((DATA / "cp2k_basis.json").read_text())
    assert {basis: values["orbital_radius_a"] for basis, values in probe["per_water"].items()} == ORBITAL_RADIUS_A
    derived = DerivedInputs(DERIVED)
    printed = probe["neighbour_lists"]
    assert {(case["basis"], case["n_water"]) for case in printed} == {(b, n) for b in ORBITAL_RADIUS_A for n in (1, 2, 3)}
    for case in printed:
        inputs = {key: case[key] for key in ("n_water", "box_a", "cutoff_ry", "ranks")} | {"basis": case["basis"]}
        ratio = derived.apply(inputs)["neighbour_pairs"] / case["particle_pairs"]
        assert abs(math.log(ratio)) <= (0.07 if case["particle_pairs"] >= 100 else 0.18), case
    # The count grows five times faster with the diffuse bases than with SZV, as CP2K's does.
    by_basis = {case["basis"]: case["particle_pairs"] for case in printed if case["n_water"] == 3 and case["box_a"] == 6.0}
    assert by_basis["DZVP"] > 4 * by_basis["SZV"] and by_basis["TZVP"] > 4 * by_basis["SZV"]


def test_nwchem_declared_basis_functions_are_the_counts_nwchem_printed():
    """The sweep's derived input ``basis_functions`` against the 'functions =' NWChem 7.0.2 printed
    for one water in each basis of the sweep (nwchem_functions.json, see SOURCES.md)."""
    from hpcpredict.daemon.lab.runtime.applications.nwchem import BASES, DERIVED
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    printed = json.loads((DATA / "nwchem_functions.json").read_text())["basis_functions_per_water"]
    assert sorted(printed) == sorted(BASES)
    derived = DerivedInputs(DERIVED)
    for basis, per_water in printed.items():
        for n_water in (1.0, 4.0):
            assert derived.apply({"n_water": n_water, "basis": basis})["basis_functions"] == n_water * per_water
    assert json.loads((DATA / "nwchem_water.json").read_text())["derived_inputs"] == DERIVED
    table = read_runs_csv(DATA / "nwchem_water.csv", target="runtime_s", derived=derived)
    assert table.inputs[-1] == "basis_functions" and all("basis_functions" in row for row in table.rows)


def test_gromacs_startup_candidate_follows_the_grid_gromacs_picked():
    """The candidate derived input ``startup_s`` (evaluated, not declared: see SOURCES.md) and the
    declared ``pme_grid`` (the grid edge as a category): the PME grid rule against the grid GROMACS chose for every box of the sweep
    (gromacs_startup.json), and its table against the start-up the probe measured (mdrun
    -nsteps 0) for each grid and rank count."""
    from hpcpredict.daemon.lab.runtime.applications.gromacs import DERIVED, PME_GRID, PME_GRID_DERIVED, STARTUP_CPU_S, STARTUP_DERIVED
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    probe = json.loads((DATA / "gromacs_startup.json").read_text())
    grid = DerivedInputs([("grid", PME_GRID)])
    declared = DerivedInputs(PME_GRID_DERIVED)   # the same grid, as a category
    for box, picked in probe["pme_grid_picked"].items():
        assert grid.apply({"box_nm": float(box), "coulomb": "pme"})["grid"] == picked, box
        assert grid.apply({"box_nm": float(box), "coulomb": "rf"})["grid"] == 0
        assert declared.apply({"box_nm": float(box), "coulomb": "pme"})["pme_grid"] == str(picked), box
        assert declared.apply({"box_nm": float(box), "coulomb": "rf"})["pme_grid"] == "none"
    assert declared.apply({"box_nm": 6.0, "coulomb": "pme"})["pme_grid"] == "over48"   # still answered
    table = read_runs_csv(DATA / "gromacs_water.csv", target="runtime_s", derived=DerivedInputs(STARTUP_DERIVED))
    assert {str(row["box_nm"]) for row in table.rows} <= set(probe["pme_grid_picked"])
    measured = probe["startup_cpu_s"]
    for ranks, by_grid in STARTUP_CPU_S.items():
        assert by_grid[0] == measured["rf"][str(ranks)]
        assert {str(g): s for g, s in by_grid.items() if g} == measured["pme"][str(ranks)]
    for row in table.rows:   # every run of the sweep has its start-up
        expected = STARTUP_CPU_S[int(row["ranks"])][0 if row["coulomb"] == "rf" else probe["pme_grid_picked"][str(row["box_nm"])]]
        assert row["startup_s"] == expected
    assert json.loads((DATA / "gromacs_water.json").read_text())["derived_inputs"] == DERIVED == PME_GRID_DERIVED
    unmeasured = DerivedInputs(STARTUP_DERIVED)
    assert "startup_s" not in unmeasured.apply({"box_nm": 6.0, "coulomb": "pme", "ranks": 2.0})
    assert "startup_s" not in unmeasured.apply({"box_nm": 3.0, "coulomb": "pme", "ranks": 4.0})


def test_lammps_quiet_sweep_declares_the_sweep_modules_derived_inputs():
    """The runtime area reads a sweep's derived inputs from its JSON: it must be what
    ``applications.lammps.DERIVED`` declares, and give the pair work of the atoms' neighbour spheres."""
    from hpcpredict.daemon.lab.runtime.applications.lammps import DERIVED
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    assert json.loads((DATA / "lammps_melt_quiet.json").read_text())["derived_inputs"] == DERIVED
    values = DerivedInputs(DERIVED).apply({"x": 4, "y": 5, "z": 6, "cutoff": 2.5, "skin": 0.5,
                                           "steps": 100, "temp": 1.0})
    assert values["pair_cost"] == pytest.approx(4 * 4 * 5 * 6 * 3.0 ** 3)
    assert values["neighbour_builds"] == pytest.approx(0.026 * 100 / 0.5)


def test_lammps_declared_builds_follow_the_builds_lammps_counted():
    """``neighbour_builds`` stands for a count LAMMPS prints: for nine in ten of the 180
    configurations it is within 15 % of the builds LAMMPS counted (``lammps_melt.csv``), and it
    orders them as LAMMPS did."""
    from hpcpredict.daemon.lab.runtime.applications.lammps import DERIVED
    from hpcpredict.daemon.runtime.derived import DerivedInputs

    table = read_runs_csv(DATA / "lammps_melt.csv", target="runtime_s", derived=DerivedInputs(DERIVED))
    first = np.unique(table.groups, return_index=True)[1]
    counted = np.array([float(table.rows[i]["neigh_builds"]) for i in first])
    declared = np.array([table.rows[i]["neighbour_builds"] for i in first])
    assert first.size == 180 and counted.min() >= 1
    assert np.mean(np.abs(declared / counted - 1) < 0.15) >= 0.9
    assert np.corrcoef(np.log(declared), np.log(counted))[0, 1] > 0.99
