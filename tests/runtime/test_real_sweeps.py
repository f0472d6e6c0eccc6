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
