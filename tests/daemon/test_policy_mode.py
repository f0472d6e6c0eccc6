"""[policy] mode: soft only while the controller's live configuration has
time_min_as_soft_limit on a release that has the option (23.11.0+), advise whenever that cannot
be told; the decision travels in the answer and is stored with the prediction."""
from __future__ import annotations

import pytest

from hpcpredict.daemon.config import ConfigError, load_config
from hpcpredict.daemon.errors import CommandError
from hpcpredict.daemon.lab.refresh import train_and_publish
from hpcpredict.daemon.policy.controller import PolicyMode
from hpcpredict.daemon.registry import ModelRegistry
from hpcpredict.daemon.lab.runtime import RuntimeModel, parse_runs_csv
from hpcpredict.daemon.lab.runtime import save_application_model
from hpcpredict.daemon.server import Daemon
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.daemon.slurm_configs import DATA, show_config

SHOW_CONFIG = show_config().replace("time_min_as_soft_limit,bf_interval=2,bf_resolution=10", "{}")


def policy(**values):
    environ = {f"HPCPREDICT_POLICY_{k.upper()}": str(v) for k, v in values.items()}
    return load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": "/nonexistent", **environ}).policy


def answering(text: str):
    calls = []

    def run(command, timeout):
        calls.append(command)
        if isinstance(text, Exception):
            raise text
        return text
    return run, calls


@pytest.mark.parametrize("mode", ["bound", "advise"])
def test_bound_and_advise_are_taken_as_configured_without_asking_the_controller(mode):
    run, calls = answering(SHOW_CONFIG.format("time_min_as_soft_limit"))
    resolved = PolicyMode(policy(mode=mode), run=run)
    resolved.refresh()
    assert resolved.current()[0] == mode and not resolved.needs_controller


@pytest.mark.parametrize("mode", ["auto", "soft"])
@pytest.mark.parametrize("parameters, expected", [
    ("bf_interval=2,time_min_as_soft_limit,bf_resolution=10", "soft"), ("time_min_as_soft_limit", "soft"),
    ("bf_interval=2", "advise"), ("(null)", "advise"), ("time_min_as_soft_limit_x", "advise")])
def test_soft_only_while_the_controller_has_the_option(mode, parameters, expected):
    run, calls = answering(SHOW_CONFIG.format(parameters))
    resolved = PolicyMode(policy(mode=mode, controller_config_command="scontrol -M c show config"), run=run)
    assert resolved.current()[0] == "advise"            # not read yet: advise
    resolved.refresh()
    # the size beside it, with the same options (-M c)
    assert resolved.current()[0] == expected and calls == [["scontrol", "-M", "c", "show", "config"],
                                                           ["scontrol", "-M", "c", "-o", "show", "nodes"]]


@pytest.mark.parametrize("failure", [CommandError(["scontrol"], 1, stderr="slurm_load_ctl_conf error: Unable to contact"),
                                     OSError("no such file"), "no such line\n"])
def test_a_controller_that_cannot_be_read_gets_advice_only(failure):
    run, _ = answering(SHOW_CONFIG.format("time_min_as_soft_limit"))
    resolved = PolicyMode(policy(mode="soft"), run=run)
    resolved.refresh()
    assert resolved.current()[0] == "soft"
    resolved._run = answering(failure)[0]                # the controller's configuration becomes unreadable
    resolved.refresh()
    mode, why = resolved.current()
    assert mode == "advise" and why


def test_a_check_that_stopped_refreshing_falls_back_to_advise(monkeypatch):
    run, _ = answering(SHOW_CONFIG.format("time_min_as_soft_limit"))
    resolved = PolicyMode(policy(mode="auto", controller_check_s=10), run=run)
    resolved.refresh()
    resolved._checked -= 31                              # three intervals without a refresh
    assert resolved.current() == ("advise", "controller configuration not re-read for too long")
    assert resolved.facts().rule == "unknown"


@pytest.mark.parametrize("key, value", [("soft_max_ratio", "-1"), ("controller_check_s", "0"),
                                        ("soft_risk", "-0.1"), ("soft_risk", "1"), ("soft_risk_hard_end", "0"),
                                        ("soft_risk_halfway", "1"), ("soft_max_slip_s", "-1"),
                                        ("soft_max_slip_s", "inf")])
def test_bad_policy_settings_are_refused(key, value):
    with pytest.raises(ConfigError, match=r"\[policy\]"):
        policy(**{key: value})


def test_a_mode_this_release_lacks_sets_no_limit():
    """A typo or a newer release's mode (a downgrade) is not fatal, and never the default: advise."""
    assert policy(mode="hard").mode == "advise"


def _service(world_dir, **policy_values):
    environ = {"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
               "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir),
               **{f"HPCPREDICT_POLICY_{k.upper()}": str(v) for k, v in policy_values.items()}}
    daemon = Daemon(load_config(None, environ=environ))
    daemon.service.reload()
    return daemon


def _with_history(service, user="ann", runs=(2400.0, 2500.0, 2600.0), time_limit_s=0):
    """The user's earlier runs, reported as the epilog reports them: only the recent-history rule
    knows them until a walltime model is trained (:func:`_with_walltime_model`)."""
    request = pb.JobRequest(job=pb.JobIdentity(user=user, application="lmp"), resources=pb.Resources(nodes=1, ntasks=4),
                            time_limit_s=time_limit_s)
    for number, elapsed in enumerate(runs):
        start = 1_700_000_000 + number * 86400        # a day apart: each run its own batch
        service.call("ReportOutcome", pb.Outcome(job_id=f"{user}{number}", elapsed_s=elapsed, state="COMPLETED", submit_time=start,
                                                 start_time=start, end_time=start + int(elapsed), request=request), 0)
    return request


def _with_walltime_model(daemon, runs, time_limit_s=4 * 3600):
    """The user's earlier runs (at ``time_limit_s``) and the walltime model trained on them and
    served, as `hpcpredict train` leaves a site: bound mode's kill limit comes only from it."""
    request = _with_history(daemon.service, runs=runs, time_limit_s=time_limit_s)
    daemon.store.flush()
    train_and_publish(daemon.config)
    daemon.service.reload()
    return request


def test_soft_answer_carries_the_point_estimate_the_line_and_is_stored(world_dir):
    # a real command prints the controller's line (as `scontrol show config` would)
    daemon = _service(world_dir, mode="soft", soft_max_slip_s=0,     # no cluster size in a captured config
                      controller_config_command=f"cat {DATA / 'show_config_24.11.5.txt'}")
    try:
        daemon.engine.policy_mode.refresh()
        service = daemon.service
        request = _with_history(service)
        request.time_limit_s = 4 * 3600
        estimate = service.call("Predict", request, 0)
        assert (estimate.policy_mode, estimate.policy_reason, estimate.apply_time_limit_s) == ("soft", "soft_time_min", 0)
        assert estimate.apply_time_min_s == -(-int(estimate.runtime_s) // 60) * 60 < estimate.suggested_time_limit_s
        assert "as a soft limit" in estimate.user_message and "never stopped before your --time=04:00:00" in estimate.user_message
        daemon.store.flush()
        row = daemon.store.prediction(estimate.prediction_id)
        assert (row.decided_time_min_s, row.decided_time_limit_s, row.policy_mode, row.policy_reason) == \
            (estimate.apply_time_min_s, None, "soft", "soft_time_min")
        # no --time: measured against the partition's DefaultTime the hook reports; none known: nothing
        request.time_limit_s = 0
        request.default_time_s = 8 * 3600
        assert service.call("Predict", request, 0).apply_time_min_s == estimate.apply_time_min_s
        request.default_time_s = 0
        assert service.call("Predict", request, 0).policy_reason == "job_limit_unknown"
        request.time_limit_s, request.time_min_s = 4 * 3600, 600   # the user's own --time-min
        assert service.call("Predict", request, 0).policy_reason == "user_time_min"
    finally:
        daemon.store.close()


def test_the_soft_time_min_is_the_estimate_at_soft_risk(world_dir):
    # recent runs 60, 50, 20, 25 min: point = the last two's mean (22.5 min); the runtime
    # outlived with probability 0.3 is their 70 % quantile (51 min); at 0.9 it is below the
    # point estimate, so the point is planned with
    decided = {}
    for soft_risk in (0.3, 0.9):
        # soft_max_slip_s 0: a captured show config has no cluster size, so the slip guard would
        # count the job as the whole machine (tests/walltime/test_walltime_policy.py tests it)
        daemon = _service(world_dir / f"soft{soft_risk}", mode="soft", soft_risk=soft_risk, soft_max_slip_s=0,
                          controller_config_command=f"cat {DATA / 'show_config_24.11.5.txt'}")
        try:
            daemon.engine.policy_mode.refresh()
            request = _with_history(daemon.service, runs=(3600.0, 3000.0, 1200.0, 1500.0))
            request.time_limit_s = 4 * 3600
            estimate = daemon.service.call("Predict", request, 0)
            assert estimate.runtime_s == 1350.0 and estimate.policy_mode == "soft"
            decided[soft_risk] = estimate.apply_time_min_s
            minutes = decided[soft_risk] // 60
            assert f"planned with {minutes} min, never stopped before your --time=04:00:00" in estimate.user_message
        finally:
            daemon.store.close()
    assert decided == {0.3: 51 * 60, 0.9: 23 * 60}


def test_bound_mode_sets_the_walltime_models_bound_and_ignores_soft_risk(world_dir):
    decided = {}
    for soft_risk in (0.3, 0.9):
        daemon = _service(world_dir / f"bound{soft_risk}", mode="bound", soft_risk=soft_risk)
        try:
            request = _with_walltime_model(daemon, runs=(3600.0, 3000.0, 1200.0, 1500.0) * 25)
            estimate = daemon.service.call("Predict", request, 0)
            assert "walltime" in estimate.model_name and not estimate.fallback, estimate.model_name
            assert (estimate.policy_mode, estimate.policy_reason) == ("bound", "time_min")
            assert estimate.apply_time_min_s == estimate.suggested_time_min_s < 4 * 3600
            decided[soft_risk] = estimate.apply_time_min_s
        finally:
            daemon.store.close()
    assert decided[0.3] == decided[0.9]      # the bound at [policy] risk, soft_risk not read


def test_bound_mode_sets_the_inputs_models_conformal_bound(world_dir, tmp_path):
    """The inputs model's bound, the upper end of its conformal interval at 1 - risk, is
    calibrated (both tails together hold at most the risk): a kill limit, with no history."""
    daemon = _service(world_dir, mode="bound")
    try:
        csv = "n,ntasks,t\n" + "\n".join(f"{n},{p},{n * 6 / p:.3f}" for n in range(10, 400, 5) for p in (1, 2, 4, 8))
        model = RuntimeModel(params={"n_estimators": 30, "random_state": 0}).fit(parse_runs_csv(csv, target="t"))
        save_application_model(model, tmp_path / "runtime", application="solver", metadata={"version": "7"})
        ModelRegistry(daemon.config.models.dir).publish("runtime", tmp_path / "runtime")
        daemon.service.reload()
        request = pb.JobRequest(job=pb.JobIdentity(user="dana", application="solver"), time_limit_s=4 * 3600,
                                resources=pb.Resources(nodes=1, ntasks=4), inputs={"n": pb.Value(number=300.0)})
        estimate = daemon.service.call("Predict", request, 0)
        assert estimate.model_name.startswith("runtime-") and 300 < estimate.runtime_s < 600   # truth: 450 s
        assert (estimate.policy_mode, estimate.policy_reason) == ("bound", "time_min")
        assert estimate.runtime_s < estimate.apply_time_min_s == estimate.suggested_time_min_s < 4 * 3600
        assert "runtime bound at 3% risk" in estimate.user_message
    finally:
        daemon.store.close()


@pytest.mark.parametrize("time_limit_s, said", [
    (4 * 3600, "kept your --time=04:00:00, set no --time-min: no calibrated runtime bound at 3% risk for this job yet"),
    (0, "set no --time (suggested --time=00:48:00): no calibrated runtime bound at 3% risk for this job yet")])
def test_bound_mode_sets_no_limit_from_recent_runs_alone(world_dir, time_limit_s, said):
    """The production failure of #31: with no walltime model that knows the job (none trained,
    a new user, a request 4x from the user's earlier ones) the recent-history rule answers, and
    its bound (1.1 x a quantile of the last runs) is no promise: replayed on KTH-SP2 on Slurm
    22.05 semantics it killed 79 of the 308 jobs it shortened at 3 % risk. No kill limit."""
    daemon = _service(world_dir, mode="bound")
    try:
        request = _with_history(daemon.service)
        request.time_limit_s = time_limit_s
        estimate = daemon.service.call("Predict", request, 0)
        assert estimate.model_name == "recent-history" and not estimate.fallback
        assert (estimate.policy_mode, estimate.policy_reason) == ("bound", "bound_not_calibrated")
        assert (estimate.apply_time_min_s, estimate.apply_time_limit_s) == (0, 0)
        assert estimate.user_message.startswith("predicted runtime 42.5 min") and estimate.user_message.endswith(said)
        daemon.store.flush()
        row = daemon.store.prediction(estimate.prediction_id)
        assert (row.decided_time_min_s, row.decided_time_limit_s, row.policy_reason) == \
            (None, None, "bound_not_calibrated")
    finally:
        daemon.store.close()


def test_soft_refused_by_the_daemon_when_the_controller_lacks_the_option(world_dir):
    daemon = _service(world_dir, mode="soft", controller_config_command="echo SchedulerParameters = bf_interval=2")
    try:
        daemon.engine.policy_mode.refresh()
        request = _with_history(daemon.service)
        request.time_limit_s = 4 * 3600
        estimate = daemon.service.call("Predict", request, 0)
        assert (estimate.policy_mode, estimate.apply_time_min_s, estimate.apply_time_limit_s) == ("advise", 0, 0)
        assert "advice only" in estimate.user_message
    finally:
        daemon.store.close()


def test_bound_answer_and_allocation_answers_decide_nothing(world_dir):
    daemon = _service(world_dir, mode="bound")
    try:
        request = _with_walltime_model(daemon, runs=(2400.0, 2500.0, 2600.0) * 25)
        estimate = daemon.service.call("Predict", request, 0)
        assert estimate.policy_mode == "bound" and estimate.apply_time_min_s >= estimate.suggested_time_limit_s - 60
        assert estimate.apply_time_min_s == estimate.suggested_time_min_s and "runtime bound at 3% risk" in estimate.user_message
        request.time_limit_s, request.time_limit_unlimited = 0, True     # --time=UNLIMITED is a --time
        assert daemon.service.call("Predict", request, 0).policy_reason == "time_min"
        allocation = daemon.service.call("PredictAtAllocation", pb.AllocationRequest(
            request=request, node_list="n1", job_id="9"), 0)
        assert (allocation.policy_reason, allocation.apply_time_min_s, allocation.user_message) == \
            ("not_at_submission", 0, "")
    finally:
        daemon.store.close()


def test_the_allocation_answer_lowers_only_a_limit_the_hook_set_and_stores_what_slurmctld_held(world_dir):
    """PrologSlurmctld's rule lives in the daemon (daemon/policy/allocation.py): asked to
    (``lower_time_limit``: the hook's own TimeLimit, the site's switch on), the answer carries the
    TimeLimit to set; the row keeps what the prolog read back beside what was decided."""
    daemon = _service(world_dir, mode="bound")
    try:
        request = _with_walltime_model(daemon, runs=(2400.0, 2500.0, 2600.0) * 25)
        request.time_limit_s = 0                     # the user gave none: the hook set 4 h
        hook_limit = 4 * 3600

        def allocate(job_id, lower, user_request=request):
            answer = daemon.service.call("PredictAtAllocation", pb.AllocationRequest(
                request=user_request, node_list="n1", job_id=job_id, job_time_limit_s=hook_limit,
                job_time_min_s=0, lower_time_limit=lower), 0)
            daemon.store.flush()
            return answer, daemon.store.prediction(answer.prediction_id)

        lowered, row = allocate("9", True)
        assert (lowered.policy_mode, lowered.policy_reason) == ("bound", "allocation_time_limit")
        assert lowered.apply_time_limit_s == -(-lowered.suggested_time_limit_s // 60) * 60 < hook_limit
        assert lowered.apply_time_min_s == 0
        assert (row.stage, row.decided_time_limit_s, row.decided_time_min_s) == \
            ("allocation", lowered.apply_time_limit_s, None)
        assert (row.started_time_limit_s, row.started_time_min_s) == (hook_limit, None)
        kept, row = allocate("10", False)            # the site's switch off, or the user's own --time
        assert (kept.apply_time_limit_s, kept.policy_reason) == (0, "not_at_submission")
        assert (row.decided_time_limit_s, row.started_time_limit_s) == (None, hook_limit)
        stranger = pb.JobRequest(job=pb.JobIdentity(user="zed", application="new"), resources=request.resources)
        fallback, row = allocate("11", True, stranger)   # no history: a fallback sets nothing
        assert (fallback.apply_time_limit_s, fallback.policy_reason) == (0, "fallback")
        hook_limit = 2**32 - 1                            # past the site cap: not a limit, not stored
        absurd, row = allocate("12", True)
        assert (absurd.apply_time_limit_s, absurd.policy_reason, row.started_time_limit_s) == \
            (0, "job_limit_unknown", None)
    finally:
        daemon.store.close()


def test_docstring_examples():
    import doctest

    from hpcpredict.daemon.policy import controller as policy_mode
    failures, tried = doctest.testmod(policy_mode)
    assert tried > 0 and failures == 0


@pytest.mark.parametrize("release, rule", [
    ("23.11.0", "hard_end"), ("24.11.5", "hard_end"), ("25.05.3", "hard_end"),
    ("25.05.4", "soft_then_halfway"), ("25.11.0", "soft_then_halfway"), ("26.05.5", "soft_then_halfway"),
    ("22.05.8", "kill"), ("23.02.7", "kill")])
def test_the_release_read_decides_the_planning_rule(release, rule):
    from hpcpredict.daemon.policy import ControllerFacts, parse_release, planning_rule

    assert planning_rule(parse_release(release), True) == rule
    assert planning_rule(parse_release(release), False) == "kill"        # without the option: a kill limit
    facts = ControllerFacts.from_show_config(show_config(release))       # a real capture, the word in it
    assert (facts.release_text, facts.soft_option, facts.rule) == (release, True, rule)
    assert facts.soft_ok == (rule != "kill")


@pytest.mark.parametrize("text, release", [
    ("slurm-wlm 22.05.8", (22, 5, 8)), ("slurm 24.11.5", (24, 11, 5)), ("25.11", (25, 11, 0)),
    ("23.11.0-0rc1", (23, 11, 0)), ("(null)", None), ("", None), ("2.6", None), ("1.22.05.8", None)])
def test_release_parsing(text, release):
    from hpcpredict.daemon.policy import parse_release

    assert parse_release(text) == release


@pytest.mark.parametrize("release", ["22.05.8", "23.02.7"])
def test_the_word_on_a_release_without_the_option_gets_advice_and_says_why(release):
    """The production failure of #38: 22.05 accepts time_min_as_soft_limit silently, and a
    --time-min there is a kill limit whatever `scontrol show config` prints."""
    run, _ = answering(show_config(release))
    resolved = PolicyMode(policy(mode="soft"), run=run)
    resolved.refresh()
    assert resolved.facts().soft_option and resolved.facts().rule == "kill"
    assert resolved.current() == ("advise", f"Slurm {release} has no time_min_as_soft_limit (it came with 23.11.0): "
                                            "--time-min would be a kill limit")


def test_a_controller_whose_release_cannot_be_read_gets_advice():
    text = "\n".join(line for line in show_config().splitlines() if not line.startswith("SLURM_VERSION"))
    run, _ = answering(text)
    resolved = PolicyMode(policy(mode="auto"), run=run)
    resolved.refresh()
    mode, why = resolved.current()
    assert (mode, resolved.facts().rule) == ("advise", "unknown") and "release is unknown" in why


def test_the_cluster_size_is_read_beside_the_configuration():
    nodes = "".join(f"NodeName=n{i:02d} Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=4 CPUTot={4 + i} "
                    f"Partitions=debug\n" for i in range(3))
    calls = []

    def run(command, timeout):
        calls.append(command)
        return nodes * 2 if command[-1] == "nodes" else show_config()     # a node listed twice counts once
    resolved = PolicyMode(policy(mode="auto"), run=run)
    resolved.refresh()
    assert (resolved.facts().total_cpus, resolved.facts().total_nodes) == (15, 3)

    def failing(command, timeout):
        if command[-1] == "nodes":
            raise CommandError(command, 1, stderr="Unable to contact slurm controller")
        return show_config()
    resolved._run = failing                 # the size is optional: the rule is still read
    resolved.refresh()
    assert resolved.current()[0] == "soft" and resolved.facts().total_cpus == 0


def test_soft_risk_is_chosen_per_planning_rule_and_the_old_key_still_reads(tmp_path):
    """Defaults per rule (hard end 0.3, soft then halfway 0.5); a site file of an earlier version
    with one ``soft_risk`` loads and that value holds on every rule."""
    environ = {"HOME": str(tmp_path), "HPCPREDICT_DATA_DIR": str(tmp_path)}
    defaults = load_config(None, environ=environ).policy
    assert (defaults.soft_risk_for("hard_end"), defaults.soft_risk_for("soft_then_halfway")) == (0.3, 0.5)
    assert defaults.soft_max_slip_s == 1800
    old = tmp_path / "old.toml"
    old.write_text("[policy]\nmode = \"auto\"\nsoft_risk = 0.25\nsoft_max_ratio = 4.0\n")
    policy = load_config(str(old), environ=environ).policy
    assert (policy.soft_risk_for("hard_end"), policy.soft_risk_for("soft_then_halfway")) == (0.25, 0.25)
    assert policy.soft_max_ratio == 4.0
    new = tmp_path / "new.toml"
    new.write_text("[policy]\nsoft_risk_halfway = 0.4\nsoft_max_slip_s = 600\n")
    policy = load_config(str(new), environ=environ).policy
    assert (policy.soft_risk_for("hard_end"), policy.soft_risk_for("soft_then_halfway")) == (0.3, 0.4)
    assert policy.soft_max_slip_s == 600
