"""job_submit.lua against the Python it must agree with, on one table of cases each: its guards
accept every limit ``plan_limits`` (hpcpredict.daemon.policy, where the daemon decides)
can decide, in every mode, and nothing else gets through; ``human``/``slurm_time``
(hpcpredict.daemon.timefmt; the prolog's copy in slurmjob too) and the AdminComment field
(slurmjob.with_our_field). One real Lua 5.1 process runs all cases of a table.
"""
from __future__ import annotations

import json
import math
import random
import subprocess

from hpcpredict.daemon import timefmt
from hpcpredict.daemon.policy import MODES, plan_limits
from hpcpredict.slurm_plugin import slurmjob

from .test_lua_hook import PRELUDE, installed, prelude

HUGE = 1e308 * 10   # inf, spelled so json.dumps writes Infinity (cjson reads it)


def run_lua(body: str, cases: list, head: str = PRELUDE) -> list:
    done = subprocess.run(["lua5.1", "-e", head + body], input=json.dumps(cases).encode(), capture_output=True,
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
        if rng.random() < 0.05:
            case["fallback"] = True
        edge.append(case)
    return edge


GUARD_ALL = """
local cases = H.cjson.decode(io.read('*a'))
local out = {}
for i, c in ipairs(cases) do
  H.config.min_time_limit_s = c.floor_s
  H.config.max_time_limit_s = c.site_cap_s
  out[i] = H.refused(c.mode, c.limit_s, c.min_s, c.job) or false
end
io.write(H.cjson.encode(out))
"""


def decided(case: dict, mode: str) -> dict:
    """What the daemon decides for ``case`` in ``mode`` (as engine._limits calls plan_limits: in
    soft mode a job without --time is measured against the partition's DefaultTime), and the job
    as the hook sees it."""
    given, default = case.get("requested_s", 0), case.pop("default_time_s", 0)
    requested = given or (default if mode == "soft" else 0)
    runtime = case.pop("runtime_s", case["bound_s"] / 2)
    change = plan_limits(mode=mode, runtime_s=runtime, **dict(case, requested_s=requested))
    max_time = case.get("max_time_s")
    return {"mode": mode, "limit_s": change.time_limit_s or 0, "min_s": change.time_min_s or 0,
            "floor_s": case.get("floor_s", 300), "site_cap_s": case.get("site_cap_s", 31622400),
            "job": {"requested_s": given, "user_time_min_s": case.get("user_time_min_s", 0),
                    **({"max_time_s": max_time} if max_time and max_time > 0 else {})}}


def test_the_guards_pass_every_limit_the_daemon_decides_in_every_mode(tmp_path):
    cases = [dict(case, default_time_s=default) for case in policy_cases()
             for default in (0, 3600)]
    rows = [decided(dict(case), mode) for case in cases for mode in MODES]
    assert sum(1 for row in rows if row["min_s"] or row["limit_s"]) > 400   # the table reaches set limits
    assert {row["mode"] for row in rows if row["min_s"]} == {"soft", "bound"}
    head = prelude(installed(tmp_path / "etc", "time_min_as_soft_limit"))
    refusals = run_lua(GUARD_ALL, rows, head)
    wrong = [(row, why) for row, why in zip(rows, refusals) if why]
    assert not wrong, wrong[:5]


def test_the_guards_refuse_a_decision_the_daemon_would_not_make(tmp_path):
    """Each decision broken one way: soft --time-min below --time by its own slurm.conf's lack of
    the option, --time-min at/over --time, a --time over the user's, off-minute values."""
    rows = []
    for case in policy_cases()[:200]:
        for mode in ("soft", "bound"):
            row = decided(dict(case), mode)
            job = row["job"]
            if row["min_s"] and job["requested_s"] and job["requested_s"] < math.inf:
                rows.append(dict(row, min_s=math.ceil(job["requested_s"] / 60) * 60))   # not below --time
                rows.append(dict(row, min_s=row["min_s"] + 1))                         # not whole minutes
            if row["limit_s"]:
                rows.append(dict(row, job=dict(job, requested_s=row["limit_s"] * 2)))   # the user gave --time
                rows.append(dict(row, mode="advise"))
    assert len(rows) > 100
    head = prelude(installed(tmp_path / "etc", "time_min_as_soft_limit"))
    assert all(run_lua(GUARD_ALL, rows, head))
    soft = [row for row in (decided(dict(case), "soft") for case in policy_cases()) if row["min_s"]]
    without_option = prelude(installed(tmp_path / "plain", "bf_interval=30"))
    assert soft and all("time_min_as_soft_limit" in why for why in run_lua(GUARD_ALL, soft, without_option))


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
