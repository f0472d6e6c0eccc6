"""The benchmark runner's contract: every area is a module with DESCRIPTION and run(args), and a
run writes benchmarks/results/AREA.json stamped with command, commit, machine and load.

These run tiny areas (a 200-host fabric, a few fuzz cases) to check the plumbing; the numbers
themselves are benchmarks, never asserted here."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import areas

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", areas())
def test_every_area_has_a_one_line_description_and_a_run_function(name):
    module = importlib.import_module(f"benchmarks.areas.{name}")
    assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION and "\n" not in module.DESCRIPTION
    assert callable(module.run)


def test_list_names_every_area():
    done = subprocess.run([sys.executable, "-m", "benchmarks", "list"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert {"walltime", "scaling", "comm", "topology", "fuzz"} <= listed == set(areas())


def _run(tmp_path: Path, *args: str) -> dict:
    out = tmp_path / "area.json"
    done = subprocess.run([sys.executable, "-m", "benchmarks", "run", *args, "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert '"headline"' in done.stdout   # the summary is printed
    return json.loads(out.read_text())


def test_a_run_is_stamped_with_command_commit_machine_and_load(tmp_path):
    record = _run(tmp_path, "topology", "--hosts", "200", "--allocation", "16", "--repeat", "1")
    assert record["area"] == "topology"
    assert record["command"] == "python -m benchmarks run topology --hosts 200 --allocation 16 --repeat 1"
    assert len(record["commit"]) >= 7 and isinstance(record["dirty"], bool)
    assert record["machine"]["cores"] >= 1 and record["machine"]["python"]
    assert set(record["load"]) == {"loadavg_before", "loadavg_after", "busy_cores", "steal_cores"}
    headline = record["results"]["headline"]
    assert headline["hosts"] == 200
    assert headline["parse ibnetdiscover"]["best_ms"] <= headline["parse ibnetdiscover"]["median_ms"]


def test_an_area_refuses_an_unknown_option_with_a_message(tmp_path):
    done = subprocess.run([sys.executable, "-m", "benchmarks", "run", "topology", "--no-such-option"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "--no-such-option" in done.stderr and "Traceback" not in done.stderr


def test_fuzz_counts_every_generated_case(tmp_path):
    record = _run(tmp_path, "fuzz", "--per-target", "7", "--only", "hostlist.fold", "hostlist.expand")
    results = record["results"]
    assert sorted(row["target"] for row in results["targets"]) == ["hostlist.expand", "hostlist.fold"]
    assert all(row["cases"] == row["ok"] + row["rejected"] + row["crash"] + row["hang"] for row in results["targets"])
    assert results["headline"]["cases"] == results["total"]["cases"] == sum(r["cases"] for r in results["targets"])


def test_a_bare_out_name_is_written_beside_the_other_results(tmp_path):
    """``--out NAME.json`` from any directory lands in benchmarks/results, not where the command ran."""
    name = f"test-bare-name-{tmp_path.name}.json"
    target = ROOT / "benchmarks" / "results" / name
    try:
        done = subprocess.run([sys.executable, "-m", "benchmarks", "run", "topology", "--hosts", "200",
                               "--allocation", "16", "--repeat", "1", "--out", name],
                              cwd=tmp_path, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr[-2000:]
        assert json.loads(target.read_text())["area"] == "topology" and not (tmp_path / name).exists()
    finally:
        target.unlink(missing_ok=True)
