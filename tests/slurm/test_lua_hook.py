"""job_submit.lua outside slurmctld: its encoding, guards, budget and circuit breaker, run by
the real Lua 5.1 interpreter (the one slurmctld links) with lua-socket and lua-cjson. Only the
``slurm`` table (log functions, NO_VAL constants), which slurmctld provides from C, is defined
by the test.
"""
from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .harness import PLUGIN, FakeHookServer

def prelude(plugin: Path) -> str:
    return """
slurm = {NO_VAL = 4294967294, NO_VAL16 = 65534, SUCCESS = 0,
  log_info = function(...) io.stderr:write("INFO ", string.format(...), "\\n") end,
  log_error = function(...) io.stderr:write("ERROR ", string.format(...), "\\n") end,
  log_user = function(...) io.stderr:write("USER ", string.format(...), "\\n") end}
dofile(%r)
H = HPCPREDICT
""" % str(plugin)


PRELUDE = prelude(PLUGIN / "job_submit.lua")


def installed(directory: Path, scheduler_parameters: str | None, release: str | None = "24.11.5") -> Path:
    """job_submit.lua installed as a site installs it: next to a slurm.conf (with or without a
    SchedulerParameters line); the hook reads that file when it is loaded, and the release from
    slurmctld's ``-V``. Outside slurmctld that is a stand-in printing ``slurm RELEASE`` (None:
    one that prints no release), named by the hook's ``slurmctld`` setting; the real
    slurmctld's is read in tests/slurm/test_policy_release.py and test_policy_soft.py."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(PLUGIN / "job_submit.lua", directory / "job_submit.lua")
    conf = "ClusterName=test\nSchedulerType=sched/backfill\n"
    if scheduler_parameters is not None:
        conf += f"SchedulerParameters={scheduler_parameters}\n"
    (directory / "slurm.conf").write_text(conf)
    slurmctld = directory / "slurmctld-version"
    slurmctld.write_text("#!/bin/sh\n" + (f"echo 'slurm {release}'\n" if release else "echo 'slurmctld: usage'\n"))
    slurmctld.chmod(0o755)
    (directory / "hpcpredict-hooks.conf").write_text(f"slurmctld = {slurmctld}\n")
    return directory / "job_submit.lua"


def lua(body: str, stdin: bytes = b"", timeout: float = 30, plugin: Path | None = None) -> subprocess.CompletedProcess:
    head = PRELUDE if plugin is None else prelude(plugin)
    return subprocess.run(["lua5.1", "-e", head + body], input=stdin, capture_output=True, timeout=timeout)


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


def submit(socket_path: str, user: str, time_limit: str, admin_comment: str = "nil",
           plugin: Path | None = None) -> subprocess.CompletedProcess:
    return lua(SUBMIT % (socket_path, user, time_limit, admin_comment), plugin=plugin)


def test_policy_without_history(daemon):
    user = f"luanew{uuid.uuid4().hex[:8]}"
    given = submit(daemon.hook_socket, user, "45")
    # no history: the "prediction" is the request, so nothing changes but the tagged field
    assert b"limit=45 min=nil comment={hpcpredict=" in given.stdout, given.stdout + given.stderr
    assert b"USER hpcpredict: predicted runtime" in given.stderr and b"[no history yet]" in given.stderr
    absent = submit(daemon.hook_socket, user, "4294967294")
    # no --time and no history: a fallback changes nothing either (Slurm's default applies)
    assert b"limit=4294967294 min=nil" in absent.stdout, absent.stdout + absent.stderr


def test_policy_with_history_keeps_other_admin_comment(daemon, walltime_model):
    """Bound mode with a trained walltime model (conftest.walltime_model), which learns the
    runs reported below: a calibrated bound, applied, the site's own AdminComment kept."""
    user = f"luaold{uuid.uuid4().hex[:8]}"
    request = {"job": {"user": user, "job_name": "x"}, "resources": {"nodes": 2}, "time_limit_s": 2700,
               "script": base64.b64encode(b"#!/bin/sh\nsrun ./lua-test.x\n").decode()}
    # Earlier runs at the same --time=45, ended just now: a served walltime model skips outcomes
    # that ended before its training (they are in it), and test_cluster_hooks' refresh retrains
    # the session's daemon on jobs that ended minutes before this test.
    now = int(time.time())
    for index, runtime in enumerate((400, 420, 410)):
        end = now - 2 + index
        daemon.call("ReportOutcome", {"job_id": f"{user}-{index}", "state": "COMPLETED", "elapsed_s": runtime,
                                      "start_time": end - runtime, "end_time": end, "request": request})
    estimate = daemon.call("Predict", request)
    assert estimate["policy_reason"] == "time_min", estimate   # the walltime model's calibrated bound
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


def test_a_job_without_time_is_marked_so_for_the_prolog(daemon):
    """No --time and no limit set by us: ";time=none", so PrologSlurmctld never reads the
    partition's limit (or a running unlimited job's year) as the user's request."""
    user = f"luanotime{uuid.uuid4().hex[:8]}"                 # no history: no limit is set
    absent = submit(daemon.hook_socket, user, "4294967294")
    assert b"limit=4294967294 " in absent.stdout and b";time=none}" in absent.stdout, absent.stdout + absent.stderr
    given = submit(daemon.hook_socket, user, "45")
    assert b"comment=" in given.stdout and b"time=none" not in given.stdout, given.stdout


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


@pytest.mark.parametrize("part_list, partition, qos, sent", [
    ({"debug": {"name": "debug", "max_time": 4294967295, "flag_default": 1}}, "nil", "", {}),
    ({"short": {"name": "short", "max_time": 3, "default_time": 2},
      "debug": {"name": "debug", "max_time": 4294967295, "flag_default": 1}}, '"short"', "",
     {"max_time_s": 180, "default_time_s": 120}),
    ({"short": {"name": "short", "max_time": 3, "flag_default": 1, "default_time": 4294967294}}, "nil", "",
     {"max_time_s": 180}),
    ({"a": {"name": "a", "max_time": 10}, "b": {"name": "b", "max_time": 5}}, '"a,b"', "", {"max_time_s": 300}),
    ({"debug": {"name": "debug", "max_time": 4294967295, "flag_default": 1}}, "nil", "normal=420", {"max_time_s": 420}),
])
def test_partition_and_qos_limits_go_to_the_daemon_and_bound_what_is_applied(tmp_path, part_list, partition, qos, sent):
    """The hook tells the daemon the limits only it sees, and refuses a --time above them."""
    fake = FakeHookServer(str(tmp_path / "reply.sock"), "reply",
                          estimate_reply(policy_mode="bound", apply_time_limit_s=960, policy_reason="time_limit"))
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
        request = json.loads(fake.received[0])["request"]
    finally:
        fake.close()
    assert {k: request[k] for k in ("max_time_s", "default_time_s") if k in request} == sent
    fits = sent.get("max_time_s", math.inf) >= 960
    assert done.stdout.decode() == ("limit=16" if fits else "limit=4294967294"), done.stderr
    if not fits:
        assert b"above the partition/QOS/site maximum" in done.stderr
    default = next(name for name, part in part_list.items() if part.get("flag_default")) if partition == "nil" else None
    assert request["job"]["partition"] == (default or json.loads(partition))   # no -p: the default partition's name
    assert request["job"]["account"] == "phys"                                   # no --account: the default



JOB = "{requested_s = 1800}"
NO_TIME = "{}"


@pytest.mark.parametrize("decision, job, expected", [
    # what the daemon decides in each mode passes
    (dict(policy_mode="bound", apply_time_min_s=960), JOB, "min=16 limit=nil bound"),
    (dict(policy_mode="bound", apply_time_limit_s=960), NO_TIME, "min=nil limit=16 bound"),
    (dict(policy_mode="bound", apply_time_limit_s=180), "{max_time_s = 180}", "min=nil limit=3 bound"),
    (dict(policy_mode="bound", apply_time_min_s=960), "{requested_s = math.huge}", "min=16 limit=nil bound"),
    (dict(policy_mode="advise"), JOB, "min=nil limit=nil advise"),
    (dict(), JOB, "min=nil limit=nil advise"),                         # a daemon from before the modes
    # the guards
    (dict(policy_mode="bound", apply_time_min_s=1800), JOB, "refused: --time-min not below --time"),
    (dict(policy_mode="bound", apply_time_min_s=960), "{requested_s = 1800, user_time_min_s = 60}",
     "refused: the user gave --time-min"),
    (dict(policy_mode="bound", apply_time_min_s=960), "{requested_s = 1800, max_time_s = 600}",
     "refused: 00:16:00 above the partition/QOS/site maximum 00:10:00"),
    (dict(policy_mode="bound", apply_time_min_s=961), JOB, "refused: not a whole number of minutes: 961"),
    (dict(policy_mode="bound", apply_time_min_s=120), JOB, "refused: kill-limit --time-min below the site floor"),
    (dict(policy_mode="bound", apply_time_limit_s=120), NO_TIME, "refused: --time below the site floor"),
    (dict(policy_mode="bound", apply_time_limit_s=960), JOB, "refused: the user gave --time"),
    (dict(policy_mode="bound", apply_time_limit_s=60 * 600000), NO_TIME, "above the partition/QOS/site maximum"),
    (dict(policy_mode="bound", apply_time_min_s=-60), JOB, "refused: not a whole number of minutes: -60"),
    (dict(policy_mode="advise", apply_time_min_s=960), JOB, "refused: advise mode sets no limit"),
    (dict(policy_mode="soft", apply_time_limit_s=960), NO_TIME, "refused: soft mode never sets --time"),
    (dict(policy_mode="soft", apply_time_min_s=120), JOB, "refused: soft --time-min refused: "),
])
def test_guards(decision, job, expected):
    estimate = {"runtime_s": 600, "suggested_time_limit_s": 960, **decision}
    done = lua("local c = H.plan(H.cjson.decode(%r), %s); io.write(string.format('min=%%s limit=%%s %%s', "
               "tostring(c.time_min), tostring(c.time_limit), c.reason:sub(1, 8) == 'refused:' and c.reason or c.mode))"
               % (json.dumps(estimate), job))
    assert done.stdout.decode().startswith(expected) or expected in done.stdout.decode(), done.stdout + done.stderr


@pytest.mark.parametrize("reply, job", [({"runtime_s": "abc", "suggested_time_limit_s": 960}, "{}"),
                                        ({"runtime_s": 600}, "{}"), ({}, "{}")])
def test_plan_of_a_broken_estimate_is_nothing(reply, job):
    done = lua("local c = H.plan(H.cjson.decode(%r), %s); io.write(c and 'changes' or 'nil')" % (json.dumps(reply), job))
    assert done.stdout.decode() == "nil", done.stderr


@pytest.mark.parametrize("parameters, soft", [("time_min_as_soft_limit", True),
                                              ("bf_interval=2,time_min_as_soft_limit,bf_resolution=10", True),
                                              ("bf_interval=2", False), (None, False),
                                              ("time_min_as_soft_limit_not", False)])
def test_soft_time_min_only_where_the_slurm_conf_next_to_the_hook_has_the_option(tmp_path, parameters, soft):
    """The daemon says soft (as a daemon forced to `mode = "soft"` would); the hook sets the soft
    --time-min only when its own slurm.conf makes --time-min soft, else refuses and logs why."""
    plugin = installed(tmp_path / "etc", parameters)
    reply = estimate_reply(policy_mode="soft", apply_time_min_s=660, policy_reason="soft_time_min",
                           user_message="predicted runtime 10.0 min; set --time-min=00:11:00 as a soft limit: "
                                        "planned with 11 min, never stopped before your --time=00:45:00")
    fake = FakeHookServer(str(tmp_path / "soft.sock"), "reply", reply)
    try:
        done = submit(fake.path, "alice", "45", plugin=plugin)
    finally:
        fake.close()
    out = done.stdout.decode()
    if soft:
        assert "limit=45 min=11 comment={hpcpredict=p1;time_min=soft}" in out, out + done.stderr.decode()
        assert b"USER hpcpredict: predicted runtime 10.0 min; set --time-min=00:11:00 as a soft limit" in done.stderr
    else:
        assert "limit=45 min=nil" in out, out + done.stderr.decode()
        assert b"has no SchedulerParameters=time_min_as_soft_limit: --time-min would be a kill limit" in done.stderr
        assert b"no limit changed (soft --time-min refused" in done.stderr


@pytest.mark.parametrize("release, soft", [("22.05.8", False), ("23.02.7", False), (None, False),
                                           ("23.11.0", True), ("25.05.3", True), ("26.05.5", True)])
def test_soft_time_min_only_on_a_release_with_the_option(tmp_path, release, soft):
    """The hook's own check of the release (#38): 22.05 and 23.02 accept time_min_as_soft_limit
    in slurm.conf silently and keep --time-min a kill limit. With the word in its slurm.conf and
    a daemon that says soft, the hook sets the soft --time-min only from 23.11.0 on; below, or
    where it cannot tell the release, it refuses and says why, at load and for the job."""
    plugin = installed(tmp_path / "etc", "bf_interval=2,time_min_as_soft_limit", release)
    reply = estimate_reply(policy_mode="soft", apply_time_min_s=660, policy_reason="soft_time_min",
                           user_message="predicted runtime 10.0 min; set --time-min=00:11:00 as a soft limit: "
                                        "planned with 11 min, never stopped before your --time=00:45:00")
    fake = FakeHookServer(str(tmp_path / "soft.sock"), "reply", reply)
    try:
        done = submit(fake.path, "alice", "45", plugin=plugin)
    finally:
        fake.close()
    out, log = done.stdout.decode(), done.stderr.decode()
    if soft:
        assert "limit=45 min=11 comment={hpcpredict=p1;time_min=soft}" in out, out + log
        assert f"INFO hpcpredict: Slurm {release} with time_min_as_soft_limit: a soft --time-min may be set" in log
        return
    why = (f"Slurm {release} has no time_min_as_soft_limit (it came with 23.11.0): --time-min would be a kill limit"
           if release else "the controller's release is unknown (slurmctld -V named none): --time-min may be a kill limit")
    assert "limit=45 min=nil" in out, out + log
    assert f"INFO hpcpredict: soft --time-min refused: {why}" in log                  # once, at load
    assert f"no limit changed (soft --time-min refused: {why})" in log                # for the job


def test_release_parsing_in_the_hook():
    cases = {"slurm-wlm 22.05.8\n": "22.5.8", "slurm 24.11.5": "24.11.5", "slurm 25.11": "25.11.0",
             "Lua 5.1.5  Copyright (C) 1994-2012": "nil", "": "nil"}
    body = "".join("local r = H.parse_release(%r); io.write(r and table.concat(r, '.') or 'nil', '|')\n" % text
                   for text in cases)
    done = lua(body)
    assert done.stdout.decode().split("|")[:-1] == list(cases.values()), done.stderr
