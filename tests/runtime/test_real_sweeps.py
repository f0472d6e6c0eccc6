"""The recorded sweeps of real codes (GROMACS, CP2K, NWChem): usable run tables with provenance."""
import json
from pathlib import Path

import numpy as np
import pytest

from hpcpredict.daemon.runtime.dataset import read_runs_csv

DATA = Path(__file__).parent.parent / "data" / "runtime"
SWEEPS = {
    "gromacs_water": ["box_nm", "nsteps", "rc_nm", "coulomb", "ranks"],
    "cp2k_water": ["n_water", "box_a", "cutoff_ry", "basis", "ranks"],
    "nwchem_water": ["n_water", "basis", "method", "ranks"],
}


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_sweep_is_a_run_table_with_repetitions_and_provenance(name):
    table = read_runs_csv(DATA / f"{name}.csv", target="runtime_s")
    assert table.inputs == SWEEPS[name]
    counts = np.bincount(table.groups)
    assert (counts >= 3).sum() >= 8, counts        # repetitions: the noise floor is measurable
    assert {row["ranks"] for row in table.rows} == {1.0, 2.0}   # both process counts swept
    provenance = json.loads((DATA / f"{name}.json").read_text())
    assert provenance["package_version"] not in ("", "unknown") and provenance["inputs"] == SWEEPS[name]
    assert provenance["machine"]["cores"] and provenance["runs"] == len(table.y)
    assert f"{name}.csv" in (DATA / "SOURCES.md").read_text()


def test_cp2k_declared_grid_is_the_grid_cp2k_printed():
    """The sweep's derived input ``fft_points`` against the finest grid CP2K itself chose for
    every (box edge, cutoff) pair of the sweeps (cp2k_grids.json, see SOURCES.md)."""
    from benchmarks.runtime.sweep_cp2k import DERIVED
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
