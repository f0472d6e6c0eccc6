"""The policies set exactly what the hook's plan_limits decides, and the online predictions
never see a job that had not ended."""
import math

import pytest

from hpcpredict.daemon.estimates import RuntimeEstimate
from hpcpredict.daemon.lab.history.traces import read_trace
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.lab.scheduling import policies
from hpcpredict.daemon.lab.scheduling.workload import SimJob, sim_jobs, trace_machine_size
from hpcpredict.daemon.policy import plan_limits


def prediction(bound, fallback=False, runtime=None, calibrated=True):
    return RuntimeEstimate(runtime_s=bound / 2 if runtime is None else runtime, bound_s=bound, low_s=bound / 3,
                           high_s=bound, coverage=0.8, explanation=(), fallback=fallback, model_name="test",
                           bound_calibrated=calibrated)


def job(request=7200.0, work=1000.0):
    return SimJob(0, "1", 0.0, 4, work, request, request if request else 366 * 86400.0)


CASES = [(1000, 7200, False), (9000, 7200, False), (1000, 7200, True), (1000, 0, False), (math.nan, 7200, False),
         (-5, 7200, False), (5e8, 0, False), (100, 7200, False), (7150, 7200, False), (20000, 7200 * 4, False)]


@pytest.mark.parametrize("bound, requested, fallback", CASES)
@pytest.mark.parametrize("soft, mode", [(True, "soft"), (False, "advise")])
@pytest.mark.parametrize("ratio", [0.0, 4.0])
def test_hpcpredict_sets_what_plan_limits_decides_for_the_cluster(bound, requested, fallback, soft, mode, ratio):
    """The replay's default policy is the hook's: soft mode where --time-min is soft, advise
    (nothing changed) where it would kill."""
    estimate = prediction(bound, fallback)
    before = job(requested)
    # a job without --time runs under the partition's limit: the daemon passes its MaxTime
    change = plan_limits(mode=mode, runtime_s=estimate.runtime_s, bound_s=bound, requested_s=requested,
                         max_time_s=None if requested else before.limit_s, fallback=fallback,
                         soft_max_ratio=ratio)
    after = policies.hpcpredict(before, estimate, soft, soft_max_ratio=ratio)
    assert after.time_min_s == (change.time_min_s or 0.0)
    assert after.limit_s == (change.time_limit_s or before.limit_s)
    assert policies.shortened(before, after) == (change.time_min_s is not None or change.time_limit_s is not None)
    if not soft:
        assert after == before


def test_soft_time_min_is_the_point_estimate_rounded_up_and_guarded_by_the_ratio():
    assert policies.hpcpredict(job(7200), prediction(1000), True, soft_max_ratio=0).time_min_s == 540
    assert policies.hpcpredict(job(7200), prediction(1000), True, soft_max_ratio=20).time_min_s == 540
    assert policies.hpcpredict(job(7200), prediction(1000), True, soft_max_ratio=10).time_min_s == 0   # 7200 > 10 x 500
    assert policies.hpcpredict(job(7200), None, True) == job(7200)


def test_soft_time_min_plans_with_the_estimate_at_soft_risk_when_the_answer_carries_it():
    """The engine's choice: soft_s (the bound at [policy] soft_risk) when the source gave one,
    else the point estimate; the guard reads the same value."""
    import dataclasses

    carried = dataclasses.replace(prediction(4000, runtime=1000.0), soft_s=1500.0)
    assert policies.hpcpredict(job(7200), carried, True, soft_max_ratio=0).time_min_s == 1500
    assert policies.hpcpredict(job(7200), carried, True, soft_max_ratio=5).time_min_s == 1500   # 7200 <= 5 x 1500
    assert policies.hpcpredict(job(7200), carried, True, soft_max_ratio=4).time_min_s == 0      # 7200 > 4 x 1500
    assert policies.hpcpredict_soft(job(7200), carried, True).time_min_s == 1500
    assert policies.hpcpredict(job(7200), carried, False) == job(7200)                        # advise: nothing
    assert policies.hpcpredict_bound(job(7200), carried, True).time_min_s == 4020             # bound: soft_s unused


def test_online_predictions_carry_the_soft_value_of_the_same_model(kth_slice):
    from hpcpredict.daemon.lab.history.traces import read_trace

    records = read_trace(kth_slice)[:600]
    plain = policies.online_predictions(records, 0.03)
    soft = policies.online_predictions(records, 0.03, soft_risk=0.3)
    assert plain.keys() == soft.keys()
    assert all(dataclasses_equal_but_soft(plain[key], soft[key]) for key in plain)
    assert all(soft[key].runtime_s <= soft[key].soft_s <= soft[key].bound_s for key in soft)
    assert sum(soft[key].soft_s > soft[key].runtime_s for key in soft) > 50


def dataclasses_equal_but_soft(a, b):
    import dataclasses

    return dataclasses.replace(a, soft_s=0.0) == dataclasses.replace(b, soft_s=0.0) and a.soft_s == 0.0


def test_site_alternatives_and_oracles():
    assert policies.hpcpredict_bound(job(7200), prediction(1000), True).time_min_s == 1020
    assert policies.hpcpredict_soft(job(7200), prediction(1000), False).time_min_s == 540
    assert policies.hpcpredict_time(job(7200), prediction(1000), True).limit_s == 1020
    assert policies.hpcpredict_time(job(7200), prediction(9000), True).limit_s == 7200
    assert policies.hpcpredict_time(job(7200), prediction(1000, fallback=True), True).limit_s == 7200


def test_bound_mode_sets_no_kill_limit_from_a_bound_that_is_not_calibrated():
    """The recent-history rule's bound (1.1 x a quantile of the user's last runs) killed 79 of
    308 KTH-SP2 jobs it shortened at 3 % risk: bound mode sets nothing from it; soft mode,
    which cannot kill, still plans with the estimate."""
    rule = prediction(1000, calibrated=False)
    assert policies.hpcpredict_bound(job(7200), rule, False) == job(7200)
    assert policies.hpcpredict_time(job(7200), rule, False) == job(7200)
    assert policies.hpcpredict_soft(job(7200), rule, True).time_min_s == 540
    assert plan_limits(mode="bound", bound_s=1000, requested_s=7200, bound_calibrated=False).reason == \
        "bound_not_calibrated"
    assert policies.oracle(job(7200, work=1234.0), None, True).limit_s == 1234.0
    assert policies.oracle_time_min(job(7200, work=1234.0), None, False).time_min_s == 1260   # bound: floor 5 min
    assert policies.oracle_time_min(job(7200, work=100.0), None, False).time_min_s == 300
    assert policies.oracle_time_min(job(7200, work=100.0), None, True).time_min_s == 120      # soft: no floor


def test_easy_plus_plus_is_the_mean_of_the_users_last_two_ended_runtimes():
    """Tsafrir et al.'s predictor, online: only jobs ended by the submission count, the two
    that ended last, per user; fewer than two: no prediction (the request stands)."""
    records = [JobRecord("1", "ann", 0.0, runtime_s=100.0, requested_time_s=3600.0, end_time=100.0),
               JobRecord("2", "ann", 10.0, runtime_s=500.0, requested_time_s=3600.0, end_time=510.0),
               JobRecord("3", "bob", 20.0, runtime_s=50.0, requested_time_s=3600.0, end_time=70.0),
               JobRecord("4", "ann", 520.0, runtime_s=60.0, requested_time_s=3600.0, end_time=580.0),
               JobRecord("5", "ann", 600.0, runtime_s=60.0, requested_time_s=3600.0, end_time=660.0),
               JobRecord("6", "bob", 700.0, runtime_s=60.0, requested_time_s=3600.0, end_time=760.0)]
    answers = policies.last_two_predictions(records)
    by_id = {r.job_id: answers.get(id(r)) for r in records}
    assert by_id["1"] is None and by_id["2"] is None and by_id["3"] is None and by_id["6"] is None
    assert by_id["4"].runtime_s == 300.0          # (100 + 500) / 2
    assert by_id["5"].runtime_s == 280.0          # the last two: 500 and 60
    after = policies.easy_plus_plus(job(3600), by_id["5"], True)
    assert (after.time_min_s, after.limit_s) == (300, 3600)     # a soft time_min, the request kept
    guarded = policies.easy_plus_plus(job(3600), by_id["5"], True, soft_max_ratio=4)
    assert (guarded.time_min_s, guarded.limit_s) == (0, 3600)   # 3600 > 4 x 280: left as the user asked
    assert policies.easy_plus_plus(job(3600), by_id["5"], True, soft_max_ratio=16).time_min_s == 300


def test_online_predictions_only_see_jobs_ended_before_submission(kth_slice):
    records = read_trace(kth_slice)[:400]

    class Witness:
        def __init__(self):
            self.seen = []

        def observe(self, record):
            self.seen.append(record)

        def submit(self, record, risk, explain=False, soft_risk=None):
            assert all(r.end_time <= record.submit_time for r in self.seen)
            return prediction(600.0)

    witness = Witness()
    answers = policies.online_predictions(records, 0.03, model=witness)
    assert len(answers) == len(records) and len(witness.seen) > 300


def test_online_predictions_fall_back_to_the_users_recent_runs_as_the_daemon_does():
    """Where the walltime model knows nothing of a job (its request is 100 x all of ann's
    earlier ones: a cold start), the daemon's next source answers: the recent-history model,
    the mean of ann's last two runs, with its soft value; the replay then sets a soft
    --time-min on it. A user with no ended job keeps the walltime model's fallback."""
    records = [JobRecord(str(i), "ann", 1000.0 * i, runtime_s=300.0 + 100 * i, requested_time_s=3600.0,
                         end_time=1000.0 * i + 300 + 100 * i) for i in range(6)]
    records.append(JobRecord("new", "ann", 7000.0, runtime_s=900.0, requested_time_s=360000.0, end_time=7900.0))
    records.append(JobRecord("bob", "bob", 7000.0, runtime_s=900.0, requested_time_s=3600.0, end_time=7900.0))
    answers = policies.online_predictions(records, 0.03, soft_risk=0.3)
    new, bob = answers[id(records[-2])], answers[id(records[-1])]
    assert not new.fallback and new.model_name == "recent-history"
    assert new.runtime_s == (700.0 + 800.0) / 2 and new.runtime_s <= new.soft_s <= 800.0
    planned = policies.hpcpredict(job(360000.0, work=900.0), new, True)
    assert planned.time_min_s == math.ceil(new.soft_s / 60) * 60 and planned.limit_s == 360000.0
    assert bob.fallback and policies.hpcpredict(job(3600.0), bob, True) == job(3600.0)


def test_machine_size_from_the_header_and_dropped_jobs(tmp_path, kth_slice):
    assert trace_machine_size(kth_slice) == 100
    path = tmp_path / "nodes.swf"
    path.write_text("; MaxNodes: 8\n1 0 1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
                    "2 5 1 10 16 -1 -1 16 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
                    "3 9 1 -1 4 -1 -1 4 60 -1 0 1 1 -1 -1 -1 -1 -1\n")
    assert trace_machine_size(path) == 8
    load = sim_jobs(read_trace(path), 8)
    assert [j.job_id for j in load.jobs] == ["1"]
    assert dict(load.dropped) == {"larger_than_machine": 1, "unknown_runtime": 1}
    assert trace_machine_size(tmp_path / "nodes.swf") == 8
    bare = tmp_path / "bare.swf"
    bare.write_text("1 0 1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert trace_machine_size(bare) is None


@pytest.mark.parametrize("release, soft_option, time_min", [
    ("22.05.8", True, 0.0), ("23.02.7", True, 0.0), ("24.11.5", False, 0.0), ("24.11.5", True, 540.0),
    ("26.05.5", True, 540.0)])
def test_hpcpredict_decides_as_the_daemon_on_the_replayed_releases_controller(release, soft_option, time_min):
    """The replay's hpcpredict goes through the daemon's own decision (daemon/policy.decide)
    with the facts the daemon would read from that controller: the word on a release without
    the option gets advice, as in the daemon."""
    from hpcpredict.daemon.config import PolicyConfig
    from hpcpredict.daemon.policy import ControllerFacts, JobAsk, Predicted, decide

    facts = ControllerFacts.for_release(release, soft_option, total_cpus=128)
    estimate = prediction(1000)
    after = policies.hpcpredict(job(7200), estimate, facts, soft_max_ratio=0)
    assert after.time_min_s == time_min
    daemon = decide(JobAsk(time_limit_s=7200, procs=4), Predicted(runtime_s=500, soft_s=500, suggested_s=1000,
                                                                  calibrated=True), PolicyConfig(), facts)
    assert (daemon.limits.time_min_s or 0.0) == time_min
    assert policies.replay_facts(release, soft_option, 128) == facts
