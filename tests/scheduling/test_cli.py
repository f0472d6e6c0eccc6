"""`hpcpredict evaluate scheduling` on real KTH-SP2 jobs: the JSON interface others rely on,
the table, and one-line errors."""
import json
import subprocess
import sys

import pytest

FIELDS = {"n", "mean_wait_s", "mean_bounded_slowdown", "utilization", "killed", "killed_node_hours",
          "killed_censored", "backfilled", "lowered", "shortened", "procs", "dropped"}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "evaluate", "scheduling", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def kth_json(kth_slice):
    done = cli(str(kth_slice), "--format", "swf", "--risk", "0.03", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_json_is_keyed_by_policy_with_every_field(kth_json):
    assert list(kth_json) == ["user", "hpcpredict", "oracle"]
    for scores in kth_json.values():
        assert FIELDS <= scores.keys()
        assert scores["n"] == 1500 and scores["procs"] == 100 and scores["dropped"] == 0
        assert 0 < scores["utilization"] <= 1 and scores["mean_bounded_slowdown"] >= 1


def test_json_values_are_consistent_across_policies(kth_json):
    user, ours, oracle = kth_json["user"], kth_json["hpcpredict"], kth_json["oracle"]
    assert user["killed"] == 0 and user["shortened"] == 0 and user["lowered"] == 0
    assert oracle["killed"] == 0 and oracle["killed_node_hours"] == 0
    assert oracle["shortened"] > 1000          # nearly every user over-requests
    # Our policy only kills jobs whose limit backfill lowered to the time_min it set.
    assert ours["killed"] <= ours["lowered"] <= ours["shortened"]
    assert oracle["mean_bounded_slowdown"] < user["mean_bounded_slowdown"]


def test_procs_overrides_the_header_and_drops_larger_jobs(kth_slice):
    done = cli(str(kth_slice), "--procs", "32", "--json")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)["user"]
    assert scores["procs"] == 32 and scores["dropped"] > 0 and scores["n"] + scores["dropped"] == 1500


def test_table_names_every_policy(kth_slice):
    done = cli(str(kth_slice), "--all-policies")
    assert done.returncode == 0, done.stderr
    for name in ("user", "hpcpredict", "oracle", "oracle-time-min", "hpcpredict-time", "hpcpredict-soft",
                 "hpcpredict-soft-point"):
        assert name in done.stdout
    assert "of the oracle's improvement" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--procs", "0"], "--procs: must be a positive"),
    (["--risk", "1.5"], "--risk: must be between 0 and 1"),
])
def test_bad_options_are_one_line_errors(kth_slice, args, message):
    done = cli(str(kth_slice), *args)
    assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.stderr


def test_trace_without_machine_size_asks_for_procs(tmp_path):
    path = tmp_path / "bare.swf"
    path.write_text("1 0 1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n")
    done = cli(str(path))
    assert done.returncode == 1 and "--procs N" in done.stderr and "Traceback" not in done.stderr
    done = cli(str(path), "--procs", "8", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["user"]["n"] == 1


@pytest.fixture(scope="module")
def kth_json_risk_30(kth_slice):
    """At a 30 % risk target the policy shortens enough jobs of the slice to compare semantics."""
    done = cli(str(kth_slice), "--risk", "0.3", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_kills_stay_within_the_risk_target_of_the_jobs_shortened(kth_json, kth_json_risk_30):
    """The bound is calibrated on the jobs it shortens, so Slurm 22.05's kills of jobs backfilled
    on their time_min stay within risk x shortened."""
    for risk, scores in ((0.03, kth_json["hpcpredict"]), (0.3, kth_json_risk_30["hpcpredict"])):
        assert scores["killed"] <= risk * scores["shortened"], (risk, scores)
    assert kth_json_risk_30["hpcpredict"]["shortened"] > 100


def test_later_slurm_semantics_lower_fewer_limits(kth_slice, kth_json_risk_30):
    """Slurm 22.05 runs every job backfilled on its time_min under the time_min; later Slurm
    only cuts a limit to the room before the reservation, so it lowers (and kills) fewer."""
    done = cli(str(kth_slice), "--json", "--risk", "0.3", "--time-min-limit", "reservation")
    assert done.returncode == 0, done.stderr
    later = json.loads(done.stdout)["hpcpredict"]
    ours = kth_json_risk_30["hpcpredict"]
    assert later["shortened"] == ours["shortened"]
    assert later["lowered"] < ours["lowered"] and later["killed"] <= ours["killed"]
    assert json.loads(done.stdout)["user"] == kth_json_risk_30["user"]


def test_trace_where_no_job_fits_is_a_clear_error(tmp_path):
    path = tmp_path / "big.swf"
    path.write_text("; MaxProcs: 4\n1 0 1 10 8 -1 -1 8 60 -1 1 1 1 -1 -1 -1 -1 -1\n")
    done = cli(str(path), "--json")
    assert done.returncode == 1 and "no job to replay on 4 processors" in done.stderr
    assert "1 larger than machine" in done.stderr and "Traceback" not in done.stderr


def test_resubmit_killed_adds_a_field_and_leaves_the_baselines_alone(kth_slice):
    """--resubmit-killed: the same keys plus ``resubmitted`` (one retry per killed job); the
    users' requests and the oracle kill nothing, so their scores equal the default replay's."""
    default = json.loads(cli(str(kth_slice), "--risk", "0.3", "--json").stdout)
    done = cli(str(kth_slice), "--risk", "0.3", "--json", "--resubmit-killed")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)
    assert list(scores) == ["user", "hpcpredict", "oracle"]
    for name, s in scores.items():
        assert s.keys() == default[name].keys() | {"resubmitted"}
        assert s["resubmitted"] == s["killed"] and s["n"] == default[name]["n"]
    assert scores["user"] == dict(default["user"], resubmitted=0)
    assert scores["oracle"] == dict(default["oracle"], resubmitted=0)
    assert scores["hpcpredict"]["killed"] > 0      # the risk-0.3 bound kills some jobs here
