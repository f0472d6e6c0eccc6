"""The sweep harness's ``_iterations`` column from a real run, and the iterations area's table."""
import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.runtime import sweep, sweep_nwchem
from hpcpredict.daemon.lab.runtime.applications import nwchem

DATA = Path(__file__).parent.parent / "data" / "runtime"


@pytest.mark.skipif(shutil.which("nwchem") is None or shutil.which("mpirun") is None, reason="needs NWChem and Open MPI")
def test_sweep_run_writes_the_iterations_nwchem_reported(tmp_path):
    """A real run through the harness: ``_iterations`` is the count in the report it kept."""
    config = {"config": 0, "n_water": 1, "basis": "sto-3g", "method": "scf", "ranks": 1}
    cpus = ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(0)))   # the CPUs the test may use
    row = sweep.run_once(sweep_nwchem, config, tmp_path, timeout_s=120, cpu=cpus)
    assert row is not None
    report = (tmp_path / sweep_nwchem.STDOUT).read_text()
    assert "Total SCF energy" in report
    assert row["_iterations"] == nwchem.scf_iterations(report) and 2 <= row["_iterations"] <= 50


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
