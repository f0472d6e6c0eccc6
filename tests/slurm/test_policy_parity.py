"""job_submit.lua's copies against their Python statements, on one table of cases each:
``plan_limits`` (hpcpredict.daemon.walltime_policy, the one statement of the walltime policy),
``human``/``slurm_time`` (hpcpredict.daemon.timefmt; the prolog's copy in slurmjob too) and the
AdminComment field (slurmjob.with_our_field). One real Lua 5.1 process runs all cases of a table.
"""
from __future__ import annotations

import json
import random
import subprocess

from hpcpredict.daemon import timefmt
from hpcpredict.daemon.walltime_policy import plan_limits
from hpcpredict.slurm_plugin import slurmjob

from .test_lua_hook import PRELUDE

HUGE = 1e308 * 10   # inf, spelled so json.dumps writes Infinity (cjson reads it)


def run_lua(body: str, cases: list) -> list:
    done = subprocess.run(["lua5.1", "-e", PRELUDE + body], input=json.dumps(cases).encode(), capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def policy_cases() -> list[dict]:
    edge = [
        dict(bound_s=1000, requested_s=7200), dict(bound_s=9000, requested_s=7200),
        dict(bound_s=7140, requested_s=7200), dict(bound_s=7141, requested_s=7200), dict(bound_s=7200, requested_s=7200),
        dict(bound_s=1000, requested_s=0, max_time_s=180), dict(bound_s=1000, requested_s=0, max_time_s=30),
        dict(bound_s=1000, requested_s=0, max_time_s=119), dict(bound_s=1, requested_s=0),
        dict(bound_s=0.001, requested_s=600), dict(bound_s=0, requested_s=600), dict(bound_s=-5, requested_s=0),
        dict(bound_s=5e8, requested_s=0), dict(bound_s=float("nan"), requested_s=0), dict(bound_s=HUGE, requested_s=0),
        dict(bound_s=-HUGE, requested_s=600), dict(bound_s=31622400, requested_s=0),
        dict(bound_s=31622400.5, requested_s=0), dict(bound_s=1000, requested_s=7200, user_time_min_s=60),
        dict(bound_s=1000, requested_s=0, user_time_min_s=60), dict(bound_s=1000, requested_s=7200, fallback=True),
        dict(bound_s=1000, requested_s=7200, set_time_min=False), dict(bound_s=1000, requested_s=0, set_time_limit=False),
        dict(bound_s=1000, requested_s=7200, max_time_s=600), dict(bound_s=1000, requested_s=7200, max_time_s=1020),
        dict(bound_s=100, requested_s=200), dict(bound_s=100, requested_s=301), dict(bound_s=100, requested_s=0,
                                                                                    floor_s=0),
        dict(bound_s=100, requested_s=0, floor_s=7200, max_time_s=3600), dict(bound_s=500, requested_s=0,
                                                                               site_cap_s=400),
        dict(bound_s=350, requested_s=0, site_cap_s=400.7), dict(bound_s=3e7, requested_s=HUGE),
        dict(bound_s=1000, requested_s=0, max_time_s=-1), dict(bound_s=1000, requested_s=0, max_time_s=0),
        dict(bound_s=59.999999, requested_s=0, floor_s=0), dict(bound_s=60.000001, requested_s=0, floor_s=0),
    ]
    rng = random.Random(16)
    for _ in range(400):
        case = dict(bound_s=rng.choice([rng.uniform(-100, 2e5), rng.uniform(0, 4e7), float(rng.randint(0, 20000))]),
                    requested_s=rng.choice([0, 0, rng.randint(1, 3000) * 60, rng.uniform(0, 2e5)]))
        if rng.random() < 0.3:
            case["max_time_s"] = rng.choice([rng.randint(1, 5000) * 60, rng.uniform(0, 3e5)])
        if rng.random() < 0.2:
            case["floor_s"] = rng.choice([0, 60, 300, rng.uniform(0, 1000)])
        if rng.random() < 0.1:
            case["site_cap_s"] = rng.uniform(100, 4e7)
        if rng.random() < 0.1:
            case["user_time_min_s"] = rng.randint(0, 100) * 60
        for flag in ("fallback", "set_time_min", "set_time_limit"):
            if rng.random() < 0.05:
                case[flag] = flag == "fallback"
        edge.append(case)
    return edge


PLAN_ALL = """
local cases = H.cjson.decode(io.read('*a'))
local out = {}
for i, case in ipairs(cases) do
  local c = H.plan_limits(case)
  out[i] = {c.time_limit_s or false, c.time_min_s or false, c.reason}
end
io.write(H.cjson.encode(out))
"""


def test_lua_plan_limits_equals_python_on_every_case():
    cases = policy_cases()
    lua_results = run_lua(PLAN_ALL, cases)
    assert len(lua_results) == len(cases)
    mismatches = []
    for case, (limit, time_min, reason) in zip(cases, lua_results):
        expected = plan_limits(**case)
        got = (limit or None, time_min or None, reason)
        if got != (expected.time_limit_s, expected.time_min_s, expected.reason):
            mismatches.append((case, got, expected))
    assert not mismatches, mismatches[:5]
    # the table reaches every rule
    reasons = {plan_limits(**case).reason for case in cases}
    assert reasons >= {"insane_estimate", "fallback", "user_time_min", "bound_not_below_request",
                       "bound_above_max_time", "time_min_off", "time_min", "time_limit_off", "time_limit",
                       "cap_below_one_minute"}


def duration_values() -> list[float]:
    rng = random.Random(4)
    values = [0, 0.4, 0.5, 0.6, 1.5, 2.5, 59.5, 119.4, 119.5, 119.6, 120, 149.99, 150, 7199, 7199.9, 7200, 7230,
              86400 * 3 - 1, 86400 * 3, 86400 * 3 + 1, 1e9, -1, -0.0001, 0.05, 5e8]
    for _ in range(3000):
        values.append(rng.choice([rng.uniform(0, 300), rng.uniform(0, 10000), rng.uniform(0, 4e5), rng.uniform(0, 1e8),
                                  float(rng.randint(0, 400000)), rng.randint(0, 20000) * 3 + 0.5]))
    return values


HUMAN_ALL = """
local values = H.cjson.decode(io.read('*a'))
local out = {}
for i, v in ipairs(values) do out[i] = {H.human(v), v >= 0 and H.slurm_time(v) or ""} end
io.write(H.cjson.encode(out))
"""


def test_lua_human_and_slurm_time_say_what_python_says():
    values = duration_values()
    lua_results = run_lua(HUMAN_ALL, values)
    for value, (human, slurm_time) in zip(values, lua_results):
        assert human == timefmt.human(value) == slurmjob.human(value), value
        if value >= 0:
            assert slurm_time == timefmt.slurm_time(value), value
    assert slurmjob.human(float("nan")) == timefmt.human(float("nan")) == "?"


FIELD_ALL = """
local cases = H.cjson.decode(io.read('*a'))
local out = {}
for i, case in ipairs(cases) do out[i] = H.with_our_field(case[1], case[2]) end
io.write(H.cjson.encode(out))
"""


def test_admin_comment_field_is_replaced_and_the_rest_kept_in_lua_and_python():
    cases = [["", "hpcpredict=a"], ["JS1:eJzLSM3JyVcozy/KSQEAGgQEXQ==", "hpcpredict=a;limit=auto"],
             ["site {hpcpredict=old;alloc=x;advice=a | b} more", "hpcpredict=new"],
             ["{hpcpredict=old}", "hpcpredict=new;time_min=auto"], ["  spaced  ", "hpcpredict=b"],
             ['{"json": [1, 2]}', "hpcpredict=c"]]
    lua_results = run_lua(FIELD_ALL, cases)
    for (comment, field), got in zip(cases, lua_results):
        assert got == slurmjob.with_our_field(comment, field), (comment, field)
        assert slurmjob.our_field(got) == field
    assert lua_results[2] == "site  more {hpcpredict=new}"
    assert lua_results[1] == "JS1:eJzLSM3JyVcozy/KSQEAGgQEXQ== {hpcpredict=a;limit=auto}"
