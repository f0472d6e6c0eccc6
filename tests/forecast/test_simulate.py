"""The start-time forecast (daemon/forecast/simulate.py) on hand-built queues whose schedule is
known: survival conditioning, the engine's own replay reproduced when beliefs are certain,
Slurm's all-at-limit run, priority order and backfill, a hypothetical job, refusals."""
import math
import random

import pytest

from hpcpredict.daemon.errors import InvalidRequest
from hpcpredict.daemon.forecast import QueuedJob, QueueSnapshot, RuntimeBelief
from hpcpredict.daemon.forecast.simulate import MAX_JOBS, MAX_RUNS, draw_runtime, forecast_start, forecast_starts
from hpcpredict.daemon.scheduling import SimJob, simulate

NOW = 1_000_020.0      # not on the 60 s backfill resolution: reservations round down from it


def pending(job_id, cpus, limit, rank, belief=None, time_min=None):
    return QueuedJob(job_id, "ann", "batch", cpus, limit, time_min, NOW - 100, None, rank, belief)


def running(job_id, cpus, limit, elapsed, belief=None, time_min=None):
    return QueuedJob(job_id, "bob", "batch", cpus, limit, time_min, NOW - elapsed - 10, NOW - elapsed, 0, belief)


def snap(*jobs, cpus=4, rule="hard_end"):
    return QueueSnapshot(NOW, cpus, rule, tuple(jobs))


def certain(seconds):
    return RuntimeBelief(seconds, 0.0)


def test_a_running_job_conditioned_on_survival_never_ends_before_now():
    # R has run 1000 s although we believed 100 s: every draw ends after now, none at its limit
    belief = RuntimeBelief(100.0, 0.5)
    rng = random.Random(3)
    draws = [draw_runtime(belief, 7200.0, 1000.0, rng) for _ in range(2000)]
    assert min(draws) >= 1000.0 and max(draws) < 7200.0
    unconditioned = [draw_runtime(belief, 7200.0, 0.0, rng) for _ in range(2000)]
    assert sorted(unconditioned)[1000] < 200.0      # the belief itself is centred on 100 s
    forecast = forecast_starts(snap(running("r", 4, 7200, 1000, belief), pending("p", 4, 600, 0)), runs=64)["p"]
    assert NOW < forecast.low80_start_s <= forecast.median_start_s <= forecast.high80_start_s < NOW + 7200 - 1000


def test_certain_beliefs_reproduce_the_engines_replay():
    rng = random.Random(0)
    queue = [pending(f"p{i}", rng.choice([1, 2, 3, 4]), rng.choice([300, 900, 3600]), i,
                     certain(rng.choice([60, 200, 500]))) for i in range(12)]
    forecasts = forecast_starts(snap(*queue), runs=5)
    # the same jobs all submitted now in priority order, each running its believed runtime
    replayed = simulate([SimJob(i, j.job_id, NOW, j.cpus, j.belief.median_s, j.time_limit_s, j.time_limit_s)
                         for i, j in enumerate(queue)], procs=4, slurm="24.11")
    for outcome in replayed:
        f = forecasts[outcome.job.job_id]
        assert f.low80_start_s == f.median_start_s == f.high80_start_s == outcome.start_s
    assert any(o.backfilled for o in replayed)        # the queue does exercise backfill


def test_slurm_start_is_the_forward_run_with_every_job_at_its_limit():
    # R (2 CPUs) believed to end soon, planned at its limit (+600 s) by Slurm's method
    jobs = (running("r", 2, 900, 300, certain(310)), pending("a", 4, 600, 0, certain(100)),
            pending("b", 2, 3600, 1, certain(100)))
    forecasts = forecast_starts(snap(*jobs), runs=3)
    assert forecasts["a"].median_start_s == NOW + 10                 # R ends at its believed 310 s
    assert forecasts["a"].slurm_start_s == NOW + 600                 # ... at its 900 s limit
    assert forecasts["b"].slurm_start_s == NOW + 600 + 600           # b behind a, a at its limit
    # no beliefs: every run is Slurm's
    plain = forecast_starts(snap(*(QueuedJob(**{**j.__dict__, "belief": None}) for j in jobs)), runs=3)
    assert all(f.median_start_s == f.slurm_start_s for f in plain.values())


def test_priority_order_and_backfill():
    # R holds 2 of 4 CPUs to +600 s; a (rank 0) needs 4: the head, reserved at +600 s.
    # b (2 CPUs, 300 s) ends before the reservation: backfilled now; c (2 CPUs, 3600 s) would
    # delay a: it waits behind it. c submitted first, but the rank decides.
    c = QueuedJob("c", "ann", "batch", 2, 3600, None, NOW - 5000, None, 2, None)
    jobs = (running("r", 2, 900, 300), pending("a", 4, 600, 0), pending("b", 2, 300, 1), c)
    forecasts = forecast_starts(snap(*jobs), runs=2)
    assert forecasts["b"].median_start_s == NOW
    assert forecasts["a"].median_start_s == NOW + 600
    assert forecasts["c"].median_start_s == NOW + 1200
    # c ranked first is the head: it starts now on the 2 free CPUs, a waits for it
    first = forecast_starts(snap(running("r", 2, 900, 300), pending("a", 4, 600, 1), pending("b", 2, 300, 2),
                                 QueuedJob(**{**c.__dict__, "priority_rank": 0})), runs=2)
    assert first["c"].median_start_s == NOW and first["a"].median_start_s == NOW + 3600


def test_a_hypothetical_job_is_placed_at_its_rank():
    jobs = (running("r", 4, 900, 300), pending("a", 4, 600, 0), pending("b", 4, 600, 1))
    ahead = forecast_starts(snap(*jobs), runs=2, extra=pending("new", 4, 600, 0))
    assert ahead["new"].median_start_s == NOW + 600 and ahead["a"].median_start_s == NOW + 1200
    behind = forecast_starts(snap(*jobs), runs=2, extra=pending("new", 4, 600, 9))
    assert behind["new"].median_start_s == NOW + 1800 and behind["b"].median_start_s == NOW + 1200
    with pytest.raises(InvalidRequest, match="appears twice"):
        forecast_starts(snap(*jobs), extra=pending("a", 1, 60, 0))
    with pytest.raises(InvalidRequest, match="not pending"):
        forecast_starts(snap(*jobs), extra=running("x", 1, 60, 10))


def test_forecasts_are_deterministic_for_a_seed_and_spread_with_the_beliefs():
    belief = RuntimeBelief(400.0, 0.8)
    jobs = (running("r", 4, 3600, 100, belief), pending("a", 4, 3600, 0, belief), pending("b", 4, 3600, 1, belief))
    once, again = forecast_starts(snap(*jobs), seed=5), forecast_starts(snap(*jobs), seed=5)
    assert once == again
    assert forecast_starts(snap(*jobs), seed=6) != once
    b = once["b"]
    assert b.runs == 32 and b.low80_start_s < b.median_start_s < b.high80_start_s <= b.slurm_start_s
    assert forecast_start(snap(*jobs), "b", seed=5) == b     # one job's forecast: the same runs


def test_unlimited_jobs_and_the_halfway_rule_are_forecast():
    jobs = (running("r", 2, math.inf, 100), running("s", 2, 7200, 4000, None, time_min=600),
            pending("a", 4, 600, 0, certain(60)))
    for rule in ("kill", "hard_end", "soft_then_halfway", "unknown"):
        f = forecast_starts(snap(*jobs, rule=rule), runs=2)["a"]
        assert math.isfinite(f.median_start_s) and f.median_start_s > NOW


@pytest.mark.parametrize("change, match", [
    (dict(total_cpus=0), "total_cpus"),
    (dict(planning_rule="fifo"), "planning_rule"),
    (dict(taken_s=math.nan), "taken_s"),
    (dict(jobs=(pending("a", 5, 60, 0),)), "CPUs of 4"),
    (dict(jobs=(pending("a", 1, 0, 0),)), "time_limit_s"),
    (dict(jobs=(pending("a", 1, 60, 0), pending("a", 1, 60, 1))), "appears twice"),
    (dict(jobs=(running("r", 3, 60, 1), running("s", 3, 60, 1))), "hold 6 CPUs"),
    (dict(jobs=(pending("a", 1, 60, 0, RuntimeBelief(math.inf, 1.0)),)), "belief.median_s"),
    (dict(jobs=(pending("a", 1, 60, 0, RuntimeBelief(-1.0, 1.0)),)), "median_s > 0"),
    (dict(jobs=tuple(pending(f"p{i}", 1, 60, i) for i in range(MAX_JOBS + 1))), "more than the 2000"),
])
def test_a_bad_or_oversized_snapshot_is_refused_clearly(change, match):
    fields = {**snap(pending("ok", 1, 60, 0)).__dict__, **change}
    with pytest.raises(InvalidRequest, match=match):
        forecast_starts(QueueSnapshot(**fields))


@pytest.mark.parametrize("runs", [0, -1, MAX_RUNS + 1, 2.5])
def test_a_bad_run_count_is_refused(runs):
    with pytest.raises(InvalidRequest, match="runs"):
        forecast_starts(snap(pending("a", 1, 60, 0)), runs=runs)


def test_one_job_forecast_names_a_pending_job():
    with pytest.raises(InvalidRequest, match="not a pending job"):
        forecast_start(snap(running("r", 1, 60, 1), pending("a", 1, 60, 0)), "r")


def test_one_users_errors_go_together_and_each_jobs_distribution_is_kept():
    belief = RuntimeBelief(600.0, 1.0)
    rng = random.Random(11)
    pairs = []
    for _ in range(2000):
        shared = rng.gauss(0.0, 1.0)
        pairs.append((draw_runtime(belief, 1e9, 0.0, rng, shared, 0.9), draw_runtime(belief, 1e9, 0.0, rng, shared, 0.9)))
    firsts = sorted(p[0] for p in pairs)
    assert 500 < firsts[1000] < 720                      # the median is still the belief's
    both_long = sum(a > 600 and b > 600 for a, b in pairs) / len(pairs)
    assert both_long > 0.35       # 1/4 + asin(0.81)/2pi = 0.40 (the two share 0.9 x 0.9); independent: 0.25
