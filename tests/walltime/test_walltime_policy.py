"""plan_limits, the one decision on a job's limits, in its three modes."""
import doctest
import math

import pytest

from hpcpredict.daemon.policy import limits
from hpcpredict.daemon.policy import MODES, LimitChange, plan_limits

HOUR = 3600


def test_docstring_examples():
    failures, tried = doctest.testmod(limits)
    assert tried > 0 and failures == 0


# ------------------------------------------------------------------------------------ bound

def test_bound_is_the_default_mode_and_sets_the_risk_bound_never_below_the_floor():
    assert plan_limits(bound_s=1000, requested_s=2 * HOUR) == LimitChange(None, 1020, "time_min", "bound")
    assert plan_limits(bound_s=10, requested_s=2 * HOUR).time_min_s == 300


def test_bound_without_time_sets_the_time_limit_clamped_to_the_maximum():
    assert plan_limits(bound_s=1000).time_limit_s == 1020
    assert plan_limits(bound_s=1000, max_time_s=600).time_limit_s == 600


def test_bound_ignores_the_point_estimate():
    assert plan_limits(mode="bound", runtime_s=100, bound_s=1000, requested_s=2 * HOUR).time_min_s == 1020


# ------------------------------------------------------------------------------------ soft

def test_soft_sets_the_point_estimate_without_floor_and_never_the_time_limit():
    change = plan_limits(mode="soft", runtime_s=61, bound_s=5000, requested_s=4 * HOUR)
    assert change == LimitChange(None, 120, "soft_time_min", "soft")


def test_soft_without_time_uses_the_partition_limit_and_sets_nothing_when_none_is_known():
    assert plan_limits(mode="soft", runtime_s=600, bound_s=900, max_time_s=HOUR).time_min_s == 600
    change = plan_limits(mode="soft", runtime_s=600, bound_s=900)
    assert change.time_min_s is None and change.time_limit_s is None and change.reason == "job_limit_unknown"


def test_soft_sets_nothing_unless_strictly_below_the_job_limit():
    assert plan_limits(mode="soft", runtime_s=3590, bound_s=4000, requested_s=HOUR).reason == "estimate_not_below_limit"
    assert plan_limits(mode="soft", runtime_s=1000, bound_s=4000, requested_s=2 * HOUR,
                       max_time_s=900).reason == "estimate_not_below_limit"


@pytest.mark.parametrize("requested, ratio, set_", [(4 * HOUR, 0, True), (4 * HOUR, 4.0, True),
                                                     (4 * HOUR + 60, 4.0, False), (4 * HOUR, 3.9, False)])
def test_soft_max_ratio_guards_waiting_jobs(requested, ratio, set_):
    change = plan_limits(mode="soft", runtime_s=HOUR, bound_s=2 * HOUR, requested_s=requested, soft_max_ratio=ratio)
    assert (change.time_min_s == HOUR) is set_
    if not set_:
        assert change.reason == "limit_above_soft_max_ratio"


@pytest.mark.parametrize("mode", ["soft", "bound"])
@pytest.mark.parametrize("kwargs, reason", [
    (dict(runtime_s=math.nan, bound_s=math.nan), "insane_estimate"),
    (dict(runtime_s=-1.0, bound_s=-1.0), "insane_estimate"),
    (dict(runtime_s=math.inf, bound_s=math.inf), "insane_estimate"),
    (dict(runtime_s=1e9, bound_s=1e9), "insane_estimate"),
    (dict(runtime_s=600, bound_s=900, fallback=True), "fallback"),
    (dict(runtime_s=600, bound_s=900, user_time_min_s=60), "user_time_min")])
def test_nothing_changes_on_a_bad_estimate_a_fallback_or_the_users_own_time_min(mode, kwargs, reason):
    change = plan_limits(mode=mode, requested_s=4 * HOUR, **kwargs)
    assert change == LimitChange(None, None, reason, mode)


# ------------------------------------------------------------------------------------ advise

@pytest.mark.parametrize("requested", [0, 4 * HOUR])
def test_advise_never_changes_a_limit(requested):
    change = plan_limits(mode="advise", runtime_s=600, bound_s=900, requested_s=requested, max_time_s=HOUR)
    assert change == LimitChange(None, None, "advise_only", "advise")


def test_unknown_mode_is_an_error_and_every_mode_is_reported():
    with pytest.raises(ValueError, match="unknown policy mode"):
        plan_limits(mode="hard", runtime_s=600, bound_s=900)
    assert {plan_limits(mode=m, runtime_s=600, bound_s=900, requested_s=HOUR).mode for m in MODES} == set(MODES)


# ------------------------------------------------------------------------------------ the user's line

def test_the_line_says_what_each_mode_did():
    from hpcpredict.daemon.policy import user_line

    def line(**kwargs):
        change = plan_limits(**kwargs)
        return user_line(change, runtime_s=kwargs.get("runtime_s", 50.0), bound_s=kwargs["bound_s"], risk=0.03,
                         requested_s=kwargs.get("requested_s", 0), job_limit_s=kwargs.get("max_time_s") or 0)
    assert line(bound_s=100, max_time_s=180).endswith("set --time=00:03:00 (the partition/QOS maximum)")
    assert line(bound_s=100).endswith("set --time=00:05:00 (runtime bound at 3% risk)")        # the floor
    assert "otherwise your --time=01:00:00 holds" in line(bound_s=1000, requested_s=HOUR)
    assert line(mode="soft", runtime_s=50.0, bound_s=100, max_time_s=HOUR).endswith(
        "set --time-min=00:01:00 as a soft limit: planned with 1 min, never stopped before the partition's time limit 01:00:00")
    assert line(mode="soft", runtime_s=3590.0, bound_s=4000, requested_s=HOUR).endswith("kept your --time=01:00:00")
    assert line(mode="advise", runtime_s=50.0, bound_s=100).endswith(
        "suggested --time=00:02:00 (advice only: hpcpredict changes no limit here)")
