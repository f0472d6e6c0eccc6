"""`hpcpredict refresh` on a saved `sacct --json` dump (real Slurm 22.05 output) and a real
daemon; the live-accounting path is covered by test_cluster_hooks.py."""
from __future__ import annotations

import json
from pathlib import Path

DUMP = Path(__file__).resolve().parents[1] / "data" / "slurm" / "sacct_22.05_jobs.json"


def test_refresh_from_dump_adds_once_and_publishes_each_time(daemon):
    first = daemon.cli("refresh", "--sacct-json", str(DUMP), "--json")
    assert first.returncode == 0, first.stderr
    one = json.loads(first.stdout)
    assert one["finished_jobs"] == 3
    assert {m["kind"]: m["version"] for m in one["serving"]}[one["kind"]] == one["version"]
    second = daemon.cli("refresh", "--sacct-json", str(DUMP), "--json")
    two = json.loads(second.stdout)
    assert (two["added"], two["already_present"]) == (0, 3)      # nothing counted twice
    assert two["version"] != one["version"]
    assert two["trained_on"] == one["trained_on"]


def test_refresh_human_output(daemon):
    done = daemon.cli("refresh", "--sacct-json", str(DUMP), "--no-reload")
    assert done.returncode == 0, done.stderr
    assert "3 finished jobs, 0 new, 3 already stored" in done.stdout
    assert "published version" in done.stdout and "daemon serves" not in done.stdout


def test_refresh_errors_are_one_line(daemon, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"jobs": 5}')
    done = daemon.cli("refresh", "--sacct-json", str(bad))
    assert done.returncode == 1 and done.stderr.startswith("hpcpredict: ") and len(done.stderr.splitlines()) == 1
    assert "jobs" in done.stderr
    missing = daemon.cli("refresh", "--sacct", str(tmp_path / "no-sacct"))
    assert missing.returncode == 1 and "not found" in missing.stderr and "Traceback" not in missing.stderr
