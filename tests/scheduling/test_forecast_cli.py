"""`hpcpredict evaluate forecast` on real KTH-SP2 jobs: the JSON keys the issue names, finite
numbers, coverage a share, the table, one-line errors."""
import json
import math
import subprocess
import sys

import pytest


def cli(*args):
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "evaluate", "forecast", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def forecast_json(kth_slice):
    done = cli(str(kth_slice), "--format", "swf", "--every", "5", "--runs", "8", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_json_has_both_methods_scored_over_the_jobs_that_waited(forecast_json):
    assert {"hpcpredict", "slurm", "runs", "sampled_every", "policy", "long_wait_s", "n"} <= forecast_json.keys()
    assert forecast_json["runs"] == 8 and forecast_json["sampled_every"] == 5 and forecast_json["policy"] == "user"
    assert forecast_json["n"] > 20
    ours, slurm = forecast_json["hpcpredict"], forecast_json["slurm"]
    assert math.isfinite(ours["median_abs_error_s"]) and math.isfinite(slurm["median_abs_error_s"])
    assert 0 <= ours["coverage80"] <= 1 and slurm["coverage80"] is None
    assert forecast_json["arrivals"] is True and forecast_json["calibrated"] is True
    assert 0 <= ours["coverage80_uncalibrated"] <= 1
    for method in (ours, slurm):
        assert method["n"] == forecast_json["n"]
        assert sum(method["by_wait"][name]["n"] for name in ("short", "long")) == method["n"]


def test_hpcpredict_policy_and_the_table(kth_slice):
    done = cli(str(kth_slice), "--format", "swf", "--every", "25", "--runs", "4", "--policy", "hpcpredict",
               "--slurm", "26.05")
    assert done.returncode == 0, done.stderr
    assert "policy hpcpredict" in done.stdout and "soft_then_halfway" in done.stdout
    assert "every 25th submission" in done.stdout and "Slurm (every job at its limit)" in done.stdout


def test_without_arrivals_or_calibration(kth_slice):
    done = cli(str(kth_slice), "--format", "swf", "--every", "25", "--runs", "4", "--no-arrivals", "--no-calibration",
               "--json")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)
    assert scores["arrivals"] is False and scores["calibrated"] is False
    assert scores["hpcpredict"]["coverage80"] == scores["hpcpredict"]["coverage80_uncalibrated"]


@pytest.mark.parametrize("args, message", [(["--runs", "0"], "--runs"), (["--every", "0"], "--every"),
                                            (["--slurm", "latest"], "--slurm"), (["--spread", "-1"], "--spread")])
def test_bad_options_are_one_line_errors(kth_slice, args, message):
    done = cli(str(kth_slice), "--format", "swf", *args)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr
