"""job_submit.lua outside slurmctld: its encoding, policy, budget and circuit breaker, run by
the real Lua 5.1 interpreter (the one slurmctld links) with lua-socket and lua-cjson. Only the
``slurm`` table (log functions, NO_VAL constants), which slurmctld provides from C, is defined
by the test.
"""
from __future__ import annotations

import base64
import json
import math
import subprocess
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .harness import PLUGIN, FakeHookServer

PRELUDE = """
slurm = {NO_VAL = 4294967294, NO_VAL16 = 65534, SUCCESS = 0,
  log_info = function(...) io.stderr:write("INFO ", string.format(...), "\\n") end,
  log_error = function(...) io.stderr:write("ERROR ", string.format(...), "\\n") end,
  log_user = function(...) io.stderr:write("USER ", string.format(...), "\\n") end}
dofile(%r)
H = HPCPREDICT
""" % str(PLUGIN / "job_submit.lua")


def lua(body: str, stdin: bytes = b"", timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["lua5.1", "-e", PRELUDE + body], input=stdin, capture_output=True, timeout=timeout)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_encode_to_json_python_accepts(data):
    """cjson does not validate UTF-8: the hook cleans every string before encoding."""
    done = lua("io.write(H.cjson.encode({s = H.utf8_clean(io.read('*a'))}))", stdin=data)
    assert done.returncode == 0, done.stderr
    text = json.loads(done.stdout.decode("utf-8"))["s"]  # strict UTF-8 and valid JSON
    try:
        assert text == data.decode("utf-8")              # valid UTF-8 survives unchanged
    except UnicodeDecodeError:
        assert "\ufffd" in text                          # bad bytes become U+FFFD


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=300))
def test_base64_matches_python(data):
    done = lua("io.write(H.base64(io.read('*a')))", stdin=data)
    assert done.stdout.decode() == base64.b64encode(data).decode()


def test_request_of_a_big_script_is_cut_and_says_its_size():
    done = lua("""
H.config.max_script_bytes = 1000
local jd = {user_name = "andr\\233", name = "x", min_nodes = 2, num_tasks = 4294967294, time_limit = 45,
            script = string.rep("#", 5000), environment = {}, argv = {[0] = "s"}}
io.write(H.cjson.encode(H.build_request(jd)))""")
    request = json.loads(done.stdout)
    assert request["script_bytes"] == 5000 and base64.b64decode(request["script"]) == b"#" * 1000
    assert request["job"]["user"] == "andr\ufffd" and request["time_limit_s"] == 2700
    assert "argv" not in request           # never an empty table, which cjson writes as {}


@pytest.mark.parametrize("text", ['{"a":1', '{"a":1}x', "[1,]", "garbage", '"abc', '{"a" 1}', "[" * 100 + "]" * 100,
                                  '{"a":"\\q"}', ""])
def test_decode_rejects_malformed_json(text):
    done = lua("local ok, err = pcall(H.cjson.decode, io.read('*a')); io.write(tostring(ok))", stdin=text.encode())
    assert done.stdout == b"false", done.stdout


SUBMIT = """
H.config.hook_socket = %r
H.config.budget_s = 0.3
local jd = {user_name = %r, name = "x", min_nodes = 2, num_tasks = 4294967294, time_limit = %s,
            script = "#!/bin/sh\\nsrun ./lua-test.x\\n", environment = {}, admin_comment = %s}
local t0 = require("socket").gettime()
slurm_job_submit(jd, {debug = {name = "debug", max_time = 4294967295, flag_default = 1}}, 1001)
io.write(string.format("took=%%.3f limit=%%s min=%%s comment=%%s", require("socket").gettime() - t0,
  tostring(jd.time_limit), tostring(jd.time_min), tostring(jd.admin_comment)))
"""


def submit(socket_path: str, user: str, time_limit: str, admin_comment: str = "nil") -> subprocess.CompletedProcess:
    return lua(SUBMIT % (socket_path, user, time_limit, admin_comment))


def test_policy_without_history(daemon):
    user = f"luanew{uuid.uuid4().hex[:8]}"
    given = submit(daemon.hook_socket, user, "45")
    # no history: the "prediction" is the request, so nothing changes but the tagged field
    assert b"limit=45 min=nil comment={hpcpredict=" in given.stdout, given.stdout + given.stderr
    assert b"USER hpcpredict: predicted runtime" in given.stderr and b"[no history yet]" in given.stderr
    absent = submit(daemon.hook_socket, user, "4294967294")
    # no --time and no history: a fallback changes nothing either (Slurm's default applies)
    assert b"limit=4294967294 min=nil" in absent.stdout, absent.stdout + absent.stderr


def test_policy_with_history_keeps_other_admin_comment(daemon):
    user = f"luaold{uuid.uuid4().hex[:8]}"
    request = {"job": {"user": user, "job_name": "x"}, "resources": {"nodes": 2},
               "script": base64.b64encode(b"#!/bin/sh\nsrun ./lua-test.x\n").decode()}
    for index, runtime in enumerate((400, 420, 410)):
        daemon.call("ReportOutcome", {"job_id": f"{user}-{index}", "state": "COMPLETED", "elapsed_s": runtime,
                                      "start_time": 1000 + index * 1000, "end_time": 1000 + index * 1000 + runtime,
                                      "request": request})
    estimate = daemon.call("Predict", dict(request, time_limit_s=2700))
    given = submit(daemon.hook_socket, user, "45", '"JS1:site-summary {hpcpredict=stale}"')
    expected_min = estimate["suggested_time_min_s"] // 60
    assert expected_min * 60 >= estimate["suggested_time_limit_s"]     # never below the bound
    assert f"limit=45 min={expected_min} comment=JS1:site-summary {{hpcpredict=".encode() in given.stdout, \
        given.stdout + given.stderr
    assert b"stale" not in given.stdout and b";time_min=auto}" in given.stdout
    assert b"set --time-min=" in given.stderr and b"otherwise your --time=00:45:00 holds" in given.stderr
    absent = submit(daemon.hook_socket, user, "4294967294")
    minutes = int(absent.stdout.split(b"limit=")[1].split()[0])
    assert minutes * 60 == max(300, math.ceil(estimate["suggested_time_limit_s"] / 60) * 60)
    assert b";limit=auto}" in absent.stdout


# A hung daemon usually shows as no answer; on a loaded machine the 300 ms can also run out
# while sending or connecting. Any of these is the budget doing its job.
@pytest.mark.parametrize("mode, reasons", [
    ("hang", (b"no answer within 300 ms", b"timeout while sending", b"timeout", b"budget spent")),
    ("garbage", (b"bad reply:",)),
])
def test_budget_and_fail_open(tmp_path, mode, reasons):
    fake = FakeHookServer(str(tmp_path / "fake.sock"), mode)
    try:
        started = time.monotonic()
        done = submit(fake.path, "alice", "45")
        took = time.monotonic() - started
    finally:
        fake.close()
    assert b"limit=45 min=nil comment=nil" in done.stdout, done.stdout + done.stderr
    assert b"ERROR hpcpredict: fail-open" in done.stderr and any(r in done.stderr for r in reasons), done.stderr
    assert took < 5  # a hang check (budget 0.3 s), not a benchmark


def test_missing_socket_fails_open(tmp_path):
    done = submit(str(tmp_path / "absent.sock"), "alice", "45")
    assert b"limit=45 min=nil comment=nil" in done.stdout
    assert b"No such file or directory" in done.stderr


BREAKER = """
H.config.hook_socket = %r
H.config.budget_s = 0.2
H.config.breaker_failures = 3
H.config.breaker_cooldown_s = %s
for i = 1, %d do
  if i == %d then require("socket").sleep(%s) end
  local jd = {user_name = "alice", name = "x", min_nodes = 1, time_limit = 45, script = "#!/bin/sh\\n", environment = {}}
  slurm_job_submit(jd, {}, 1001)
  io.write(string.format("%%d limit=%%s failures=%%d\\n", i, tostring(jd.time_limit), H.breaker.failures))
end
"""


def test_breaker_stops_calling_a_hung_daemon_then_tries_again(tmp_path):
    """Three failures open the breaker: the next jobs are accepted without a connection until
    the cool-down ends; then one call is tried (and fails again: the breaker re-opens)."""
    fake = FakeHookServer(str(tmp_path / "hung.sock"), "hang")
    try:
        done = lua(BREAKER % (fake.path, "1.0", 7, 6, "1.1"))
        accepted = fake.accepted
    finally:
        fake.close()
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().count("limit=45") == 7           # every job accepted unchanged
    assert accepted == 4, (accepted, done.stderr)                # calls 1-3, then 6 after the cool-down
    assert done.stderr.count(b"breaker open after 3 failures") == 2   # jobs 4 and 5
    assert done.stderr.count(b"breaker open after 4 failures") == 1   # job 7: the retry (6) failed
    assert b"3 consecutive failures: not calling the daemon for 1 s" in done.stderr


def test_breaker_closes_after_a_success(tmp_path, daemon):
    done = lua(BREAKER.replace("H.config.hook_socket = %r", "H.config.hook_socket = %r\nH.breaker.failures = 5")
               % (daemon.hook_socket, "0", 2, 99, "0"))
    assert b"1 limit=45 failures=0" in done.stdout, done.stdout + done.stderr


def estimate_reply(**fields) -> bytes:
    estimate = {"prediction_id": "p1", "runtime_s": 600, "suggested_time_limit_s": 960, "risk": 0.03,
                "interval": {"low_s": 400, "high_s": 900, "coverage": 0.8}}
    estimate.update(fields)
    return json.dumps({"ok": True, "response": estimate}).encode()


@pytest.mark.parametrize("field, value", [
    ("suggested_time_limit_s", 5e8), ("suggested_time_limit_s", -5), ("suggested_time_limit_s", float("nan")),
    ("runtime_s", 5e8), ("runtime_s", -5), ("runtime_s", float("nan")), ("runtime_s", float("inf")),
    ("suggested_time_limit_s", "abc")])
@pytest.mark.parametrize("time_limit", ["45", "4294967294"])
def test_absurd_replies_change_nothing(tmp_path, field, value, time_limit):
    """The real daemon cannot produce these (uint32 fields, checked models): a fake socket
    server answers them."""
    fake = FakeHookServer(str(tmp_path / "absurd.sock"), "reply", estimate_reply(**{field: value}))
    try:
        done = submit(fake.path, "alice", time_limit)
    finally:
        fake.close()
    assert f"limit={time_limit} min=nil comment=nil".encode() in done.stdout, done.stdout + done.stderr
    assert b"insane estimate: " + field.encode() in done.stderr and b"USER" not in done.stderr


@pytest.mark.parametrize("part_list, partition, qos, expected", [
    ({"debug": {"name": "debug", "max_time": 4294967295, "flag_default": 1}}, "nil", "", "limit=16"),
    ({"short": {"name": "short", "max_time": 3}, "debug": {"name": "debug", "max_time": 4294967295, "flag_default": 1}},
     '"short"', "", "limit=3"),
    ({"short": {"name": "short", "max_time": 3, "flag_default": 1}}, "nil", "", "limit=3"),
    ({"a": {"name": "a", "max_time": 10}, "b": {"name": "b", "max_time": 5}}, '"a,b"', "", "limit=5"),
    ({"debug": {"name": "debug", "max_time": 4294967295, "flag_default": 1}}, "nil", "normal=420", "limit=7"),
])
def test_limits_are_clamped_to_partition_and_qos(tmp_path, part_list, partition, qos, expected):
    fake = FakeHookServer(str(tmp_path / "reply.sock"), "reply", estimate_reply())
    parts = "{" + ", ".join(f"[{name!r}] = {{" + ", ".join(f"{k} = {v!r}" for k, v in part.items()) + "}"
                            for name, part in part_list.items()) + "}"
    try:
        done = lua("""
H.config.hook_socket = %r
H.config.qos_max_wall_s = %r
local jd = {user_name = "alice", name = "x", min_nodes = 1, time_limit = 4294967294, partition = %s,
            default_qos = "normal", default_account = "phys", script = "#!/bin/sh\\n", environment = {}}
slurm_job_submit(jd, %s, 1001)
io.write("limit=" .. tostring(jd.time_limit))""" % (fake.path, qos, partition, parts))
    finally:
        fake.close()
    assert done.stdout.decode() == expected, done.stderr
    sent = json.loads(fake.received[0])["request"]["job"]["partition"]
    default = next(name for name, part in part_list.items() if part.get("flag_default")) if partition == "nil" else None
    assert sent == (default or json.loads(partition)), sent     # a job without -p: the default partition's name
    assert json.loads(fake.received[0])["request"]["job"]["account"] == "phys"   # no --account: the default


@pytest.mark.parametrize("estimate, job, expected", [
    ({"runtime_s": 600, "suggested_time_limit_s": 960}, "{requested_s = 1800}", "min=16 limit=nil time_min"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960}, "{}", "min=nil limit=16 time_limit"),
    ({"runtime_s": 5000, "suggested_time_limit_s": 6000}, "{requested_s = 1800}",
     "min=nil limit=nil bound_not_below_request"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960, "fallback": True}, "{requested_s = 1800}",
     "min=nil limit=nil fallback"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960}, "{requested_s = 1800, user_time_min_s = 60}",
     "min=nil limit=nil user_time_min"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960}, "{requested_s = 1800, max_time_s = 600}",
     "min=nil limit=nil bound_above_max_time"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960}, "{requested_s = math.huge}", "min=16 limit=nil time_min"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960, "limits_withheld": "ann opted out"}, "{requested_s = 1800}",
     "min=nil limit=nil time_min_off"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960, "limits_withheld": "ann opted out"}, "{}",
     "min=nil limit=nil time_limit_off"),
    ({"runtime_s": 600, "suggested_time_limit_s": 960, "limits_withheld": ""}, "{}", "min=nil limit=16 time_limit"),
    ({"runtime_s": "abc", "suggested_time_limit_s": 960}, "{}", "nil"),
    ({"runtime_s": 600}, "{}", "nil"),
    ({}, "{}", "nil"),
])
def test_plan(estimate, job, expected):
    done = lua("local c = H.plan(H.cjson.decode(%r), %s); io.write(c and string.format('min=%%s limit=%%s %%s', "
               "tostring(c.time_min), tostring(c.time_limit), c.reason) or 'nil')" % (json.dumps(estimate), job))
    assert done.stdout.decode() == expected, done.stderr
