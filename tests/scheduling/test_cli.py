"""`hpcpredict evaluate scheduling` on real KTH-SP2 jobs: the JSON interface others rely on,
the table, and one-line errors."""
import json
import subprocess
import sys

import pytest

FIELDS = {"n", "mean_wait_s", "mean_bounded_slowdown", "utilization", "killed", "killed_node_hours",
          "killed_censored", "backfilled", "lowered", "shortened", "procs", "dropped",
          "p99_wait_s", "max_wait_s", "wide_mean_wait_s", "wide_p99_wait_s", "wide_max_wait_s"}


def cli(*args):
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "evaluate", "scheduling", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def kth_json(kth_slice):
    done = cli(str(kth_slice), "--format", "swf", "--risk", "0.03", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_json_is_keyed_by_policy_with_every_field(kth_json):
    assert list(kth_json) == ["user", "hpcpredict", "oracle", "easy++"]
    for scores in kth_json.values():
        assert FIELDS <= scores.keys()
        assert scores["n"] == 1500 and scores["procs"] == 100 and scores["dropped"] == 0
        assert 0 < scores["utilization"] <= 1 and scores["mean_bounded_slowdown"] >= 1
        assert scores["mean_wait_s"] <= scores["p99_wait_s"] <= scores["max_wait_s"]
        assert scores["wide_p99_wait_s"] <= scores["wide_max_wait_s"] <= scores["max_wait_s"]
        # the widest 5 %: ties at the 95th percentile's size may add a few
        assert scores["wide_procs"] > 1 and 0.05 * 1500 <= scores["wide_n"] < 0.15 * 1500


def test_json_values_are_consistent_across_policies(kth_json):
    """Default replay: Slurm 24.11 with time_min_as_soft_limit. Soft limits never kill; our
    policy and EASY++ set soft --time-min only (never --time), so nothing is lowered."""
    user, ours, oracle, easy = kth_json["user"], kth_json["hpcpredict"], kth_json["oracle"], kth_json["easy++"]
    assert user["killed"] == 0 and user["shortened"] == 0 and user["lowered"] == 0
    assert oracle["killed"] == 0 and oracle["killed_node_hours"] == 0
    assert oracle["shortened"] > 1000          # nearly every user over-requests
    for soft in (ours, easy):
        assert soft["killed"] == 0 and soft["lowered"] == 0 and soft["shortened"] > 300
    assert oracle["mean_bounded_slowdown"] < user["mean_bounded_slowdown"]
    assert ours["mean_bounded_slowdown"] < user["mean_bounded_slowdown"]


def test_procs_overrides_the_header_and_drops_larger_jobs(kth_slice):
    done = cli(str(kth_slice), "--procs", "32", "--json")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)["user"]
    assert scores["procs"] == 32 and scores["dropped"] > 0 and scores["n"] + scores["dropped"] == 1500


def test_table_names_every_policy(kth_slice):
    done = cli(str(kth_slice), "--all-policies")
    assert done.returncode == 0, done.stderr
    for name in ("user", "hpcpredict", "oracle", "easy++", "hpcpredict-soft", "hpcpredict-bound", "hpcpredict-time",
                 "oracle-time-min"):
        assert name in done.stdout
    assert "of the oracle's improvement" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--procs", "0"], "--procs: must be a positive"),
    (["--risk", "1.5"], "--risk: must be between 0 and 1"),
    (["--soft-max-ratio", "-1"], "--soft-max-ratio: must be a finite number >= 0"),
    (["--soft-risk", "1"], "--soft-risk: must be between 0 and 1"),
    (["--slurm", "latest"], "--slurm: slurm must be a Slurm release number X.Y[.Z]"),
    (["--soft-max-slip", "-5"], "--soft-max-slip: must be a finite number >= 0"),
    (["--slurm", "26"], "--slurm: slurm must be a Slurm release number X.Y[.Z]"),
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
def kth_json_22_05(kth_slice):
    done = cli(str(kth_slice), "--slurm", "22.05", "--risk", "0.3", "--all-policies", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_on_22_05_the_default_policy_changes_nothing_and_kills_nothing(kth_json_22_05):
    """--time-min kills on 22.05: the product only advises there, so its replay is the users'."""
    scores = kth_json_22_05
    assert scores["hpcpredict"]["shortened"] == 0 and scores["hpcpredict"]["killed"] == 0
    assert scores["hpcpredict"] == scores["user"]


def test_kills_of_the_bound_stay_within_the_risk_target_of_the_jobs_shortened(kth_json_22_05):
    """The bound (opt-in mode "bound") is calibrated on the jobs it shortens, so 22.05's kills of
    jobs backfilled on their time_min stay within risk x shortened; the soft value (the estimate
    at soft_risk 0.3) as the same kill limit (hpcpredict-soft without a soft option) kills more."""
    bound, soft = kth_json_22_05["hpcpredict-bound"], kth_json_22_05["hpcpredict-soft"]
    assert bound["shortened"] > 100 and 0 < bound["killed"] <= 0.3 * bound["shortened"]
    assert soft["killed"] > bound["killed"]


def test_release_semantics_without_the_option(kth_slice, kth_json_22_05):
    """24.11 without time_min_as_soft_limit lowers every time_min job's limit (also those the
    main scheduler would start), 25.05.3 only to the room before the reservation: it lowers
    and kills fewer; the users' requests replay the same everywhere."""
    lowered = {}
    for slurm in ("24.11", "25.05.3"):
        done = cli(str(kth_slice), "--json", "--risk", "0.3", "--slurm", slurm, "--no-soft-limit", "--all-policies")
        assert done.returncode == 0, done.stderr
        scores = json.loads(done.stdout)
        assert scores["user"] == kth_json_22_05["user"]
        assert scores["hpcpredict"] == scores["user"]            # no soft option: advise only
        lowered[slurm] = scores["hpcpredict-bound"]
    old = kth_json_22_05["hpcpredict-bound"]
    assert lowered["24.11"]["lowered"] >= old["lowered"] > lowered["25.05.3"]["lowered"]
    assert lowered["25.05.3"]["killed"] <= old["killed"] <= lowered["24.11"]["killed"]


@pytest.mark.parametrize("slurm", ["22.05", "23.02.7"])
def test_the_option_word_before_23_11_kills_so_the_default_advises(kth_slice, kth_json_22_05, slurm):
    """Before 23.11 time_min_as_soft_limit does not exist: the replay of 23.02 is 22.05's."""
    done = cli(str(kth_slice), "--slurm", slurm, "--risk", "0.3", "--all-policies", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == kth_json_22_05


@pytest.fixture(scope="module")
def kth_json_26_05(kth_slice):
    done = cli(str(kth_slice), "--format", "swf", "--risk", "0.03", "--slurm", "26.05", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_26_05_replays_the_halfway_rule_with_the_same_interface(kth_slice, kth_json, kth_json_26_05):
    """The same keys and fields on 26.05; soft limits never kill there either; the users' own
    limits and the oracle (no --time-min) replay as on 24.11, the soft policies differently;
    25.11 and 26.05.5 are the same rule as 26.05."""
    assert list(kth_json_26_05) == ["user", "hpcpredict", "oracle", "easy++"]
    for name, scores in kth_json_26_05.items():
        assert FIELDS <= scores.keys() and scores["killed"] == 0
    assert kth_json_26_05["user"] == kth_json["user"] and kth_json_26_05["oracle"] == kth_json["oracle"]
    assert kth_json_26_05["easy++"] != kth_json["easy++"]
    done = cli(str(kth_slice), "--risk", "0.03", "--slurm", "26.05.5", "--json")
    assert done.returncode == 0 and json.loads(done.stdout) == kth_json_26_05
    table = cli(str(kth_slice), "--slurm", "25.11")
    assert table.returncode == 0 and "soft then halfway" in table.stdout


def test_the_soft_value_and_its_guard_follow_the_planning_rule(kth_slice, kth_json, kth_json_26_05):
    """The default soft risk is the rule's ([policy] soft_risk_hard_end 0.3 on 24.11,
    soft_risk_halfway 0.5 on 26.05): naming it changes nothing; the other rule's changes the
    replay. Without the slip guard more soft limits are set."""
    same = json.loads(cli(str(kth_slice), "--slurm", "26.05", "--soft-risk", "0.5", "--json").stdout)
    other = json.loads(cli(str(kth_slice), "--slurm", "26.05", "--soft-risk", "0.3", "--json").stdout)
    assert same["hpcpredict"] == kth_json_26_05["hpcpredict"] != other["hpcpredict"]
    unguarded = json.loads(cli(str(kth_slice), "--soft-max-slip", "0", "--json").stdout)["hpcpredict"]
    assert unguarded["shortened"] > kth_json["hpcpredict"]["shortened"] and unguarded["killed"] == 0


def test_soft_max_ratio_sets_fewer_soft_limits(kth_slice, kth_json):
    done = cli(str(kth_slice), "--json", "--soft-max-ratio", "2")
    assert done.returncode == 0, done.stderr
    guarded = json.loads(done.stdout)
    assert 0 < guarded["hpcpredict"]["shortened"] < kth_json["hpcpredict"]["shortened"]
    assert guarded["user"] == kth_json["user"] and guarded["easy++"] == kth_json["easy++"]


def test_trace_where_no_job_fits_is_a_clear_error(tmp_path):
    path = tmp_path / "big.swf"
    path.write_text("; MaxProcs: 4\n1 0 1 10 8 -1 -1 8 60 -1 1 1 1 -1 -1 -1 -1 -1\n")
    done = cli(str(path), "--json")
    assert done.returncode == 1 and "no job to replay on 4 processors" in done.stderr
    assert "1 larger than machine" in done.stderr and "Traceback" not in done.stderr


def test_resubmit_killed_adds_a_field_and_leaves_the_baselines_alone(kth_slice, kth_json_22_05):
    """--resubmit-killed: the same keys plus ``resubmitted`` (one retry per killed job); the
    users' requests and the oracle kill nothing, so their scores equal the default replay's."""
    default = kth_json_22_05
    done = cli(str(kth_slice), "--slurm", "22.05", "--risk", "0.3", "--json", "--all-policies", "--resubmit-killed")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)
    assert list(scores) == list(default)
    for name, s in scores.items():
        assert s.keys() == default[name].keys() | {"resubmitted"}
        assert s["resubmitted"] == s["killed"] and s["n"] == default[name]["n"]
    assert scores["user"] == dict(default["user"], resubmitted=0)
    assert scores["oracle"] == dict(default["oracle"], resubmitted=0)
    assert scores["hpcpredict-bound"]["killed"] > 0      # the risk-0.3 bound kills some jobs here


def test_soft_risk_is_the_configuration_default_and_moves_the_soft_time_min(kth_slice, kth_json):
    """hpcpredict's soft --time-min is the estimate at [policy] soft_risk (0.3 by default); a
    soft_risk near 1 plans with the point estimate (lower values: more jobs fit below their --time)."""
    default = json.loads(cli(str(kth_slice), "--soft-risk", "0.3", "--json").stdout)["hpcpredict"]
    near_point = json.loads(cli(str(kth_slice), "--soft-risk", "0.95", "--json").stdout)["hpcpredict"]
    assert default == kth_json["hpcpredict"]
    assert near_point["shortened"] > default["shortened"] and near_point["killed"] == default["killed"] == 0
