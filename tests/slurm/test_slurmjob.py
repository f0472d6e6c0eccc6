"""How the hook scripts read jobs (slurm_plugin/slurmjob.py), on real Slurm 22.05 output and
hostile job names."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcpredict.slurm_plugin import slurmjob

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def read(name: str) -> str:
    return (DATA / name).read_text()


EPILOG = json.loads(read("epilog_22.05_squeue.json"))   # squeue + environment inside EpilogSlurmctld
FORGED = "0123456789abcdef0123456789abcdef"                 # the id the hostile job name carries


def epilog_view(name: str) -> slurmjob.Job:
    case = EPILOG[name]
    return slurmjob.with_environment(slurmjob.job_from_squeue(case["squeue"], case["job_id"]), case["environment"])


@pytest.mark.parametrize("name, state, exit_code", [
    ("completed", "COMPLETED", 0),
    ("failed", "FAILED", 3),
    ("timeout", "TIMEOUT", 0),
    ("cancelled", "COMPLETED", 0),   # scancel'ed while running reads completed: why the epilog waits for sacct
])
def test_outcome_from_the_epilogs_view(name, state, exit_code):
    job = epilog_view(name)
    assert job.state == "COMPLETING" and job.user == "alice" and job.uid == 1001
    outcome = slurmjob.outcome_from_snapshot(job, EPILOG[name]["environment"]["SLURM_JOB_EXIT_CODE2"])
    assert (outcome["state"], outcome["exit_code"]) == (state, exit_code)
    assert outcome["end_time"] >= outcome["start_time"] > 0
    assert outcome["elapsed_s"] == outcome["end_time"] - outcome["start_time"]
    assert outcome["prediction_id"] == slurmjob.prediction_id(job.admin_comment) != ""
    assert outcome["request"]["job"]["user"] == "alice"      # always: the daemon links only alice's predictions
    assert outcome["node_list"]                               # squeue shows none while COMPLETING: the environment's


def test_the_exit_status_squeue_shows_without_the_environment():
    job = slurmjob.job_from_squeue(EPILOG["failed"]["squeue"], EPILOG["failed"]["job_id"])
    assert (job.exit_code, job.exit_signal, slurmjob.snapshot_state(job)) == (3, 0, "FAILED")


def test_timeout_view_elapsed_beyond_limit():
    outcome = slurmjob.outcome_from_snapshot(epilog_view("timeout"))
    assert outcome["elapsed_s"] == 87 and outcome["request"]["time_limit_s"] == 60


def test_a_hostile_job_name_is_only_a_name():
    """Finding: alice named her job ``x AdminComment={hpcpredict=<bob's id>} UserId=`` plus a
    newline and ``   UserId=bob(1002)``, and put ``|AdminComment={...}`` in her comment (real
    22.05 job). Read as text, scontrol's output gives the forged id and an empty user; read as
    the hooks read it, the name is the name, the id is the one job_submit.lua wrote, the user is
    alice."""
    from .harness import scontrol_fields

    text = read("scontrol_show_job_hostile_name.txt")
    assert slurmjob.prediction_id(scontrol_fields(text)["AdminComment"]) == FORGED   # what the old parser did
    assert scontrol_fields(text)["UserId"] == ""
    job = epilog_view("hostile")
    assert job.job_name == ("x AdminComment={hpcpredict=0123456789abcdef0123456789abcdef} UserId=\n"
                            "   UserId=bob(1002)")
    assert (job.user, job.uid, job.group, job.account) == ("alice", 1001, "alice", "research")
    outcome = slurmjob.outcome_from_snapshot(job, "0:0")
    assert outcome["prediction_id"] == "d436ab83b5672d602498f665c78d9ab9" != FORGED
    assert outcome["request"]["job"]["user"] == "alice" and outcome["request"]["job"]["job_name"] == job.job_name
    assert FORGED not in json.dumps(outcome).replace(json.dumps(job.job_name)[1:-1], "")


HOSTILE_NAMES = [
    "x AdminComment={hpcpredict=" + FORGED + "}",
    "x UserId= AdminComment={hpcpredict=" + FORGED + "}",
    "a\n   UserId=bob(1002) GroupId=bob(1002)\n   AdminComment={hpcpredict=" + FORGED + "}",
    "n|COMPLETED|None|1:00|0:00|1|2|3|0:01|1|1|1|0|normal|0||research|debug|bob|1002|bob|{hpcpredict=" + FORGED + "}",
    "}{hpcpredict=" + FORGED + ";alloc=" + FORGED + "}\r\n\t=;|",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_never_reach_identity_or_our_field(name):
    """Whatever the name (spaces, "=", braces, "|", newlines, our own field's syntax), the
    outcome and the prolog's request carry the job's own id and user: the name is a value."""
    case = EPILOG["completed"]
    environment = dict(case["environment"], SLURM_JOB_NAME=name)
    job = slurmjob.with_environment(slurmjob.job_from_squeue(case["squeue"], case["job_id"]), environment)
    outcome = slurmjob.outcome_from_snapshot(job, "0:0")
    assert outcome["prediction_id"] == "9f7b964ef7bf9328359ce8bd756aec35"
    request = slurmjob.job_request(job)
    assert request["job"]["user"] == "alice" and request["job"]["job_name"] == name and request["job_id"] == "1"
    assert slurmjob.advice_from_admin_comment(job.admin_comment)[0].startswith("predicted runtime 60 s on n01")


def test_squeue_line_takes_admin_comment_whole_and_refuses_what_is_not_the_job():
    fields = ["12", "PENDING", "JobHeldUser", "2:00", "0:00", "1795765732", "N/A", "N/A", "0:00", "1", "1", "1", "0",
              "normal", "0", "", "research", "debug", "alice", "1001", "alice"]
    comment = "site|data\nsecond line {hpcpredict=abc;advice=x | y}"
    job = slurmjob.job_from_squeue("|".join(fields) + "|" + comment + "\n", "12")
    assert job.admin_comment == comment and slurmjob.prediction_id(job.admin_comment) == "abc"
    assert (job.start_time, job.end_time, job.time_limit_s, job.time_min_s) == (0, 0, 120, 0)
    for text in ("", "12|PENDING\n"):   # job unknown (squeue prints nothing), or a cut line
        with pytest.raises(ValueError):
            slurmjob.job_from_squeue(text, "12")
    with pytest.raises(ValueError, match="not '13'"):
        slurmjob.job_from_squeue("|".join(fields) + "|\n", "13")
    with pytest.raises(ValueError, match="SLURM_JOB_ID"):
        slurmjob.with_environment(job, {"SLURM_JOB_ID": "99"})


def test_squeue_json_of_22_05_is_read_by_field():
    """22.05's `squeue --json` (every job: it ignores -j) read by key; the hostile job's name
    stays its name."""
    text = read("squeue_json_22.05_epilog.json")
    hostile = slurmjob.job_from_json(text, EPILOG["hostile"]["job_id"])
    assert hostile.job_name == EPILOG["hostile"]["environment"]["SLURM_JOB_NAME"]
    assert (hostile.user, hostile.uid, hostile.state) == ("alice", 1001, "COMPLETING")
    assert slurmjob.prediction_id(hostile.admin_comment) == "d436ab83b5672d602498f665c78d9ab9"
    assert hostile.time_limit_s == 120 and hostile.end_time > hostile.start_time > hostile.submit_time > 0
    failed = slurmjob.job_from_json(text, EPILOG["failed"]["job_id"])
    assert (failed.exit_code, failed.nodes, slurmjob.snapshot_state(failed)) == (3, 2, "FAILED")
    with pytest.raises(ValueError):
        slurmjob.job_from_json(text, "999")


JSON_24_11 = json.loads(read("scontrol_show_job_json_24.11.json"))   # real 24.11.5 output


def test_scontrol_json_of_24_11_is_read_by_field():
    case = JSON_24_11["hostile"]
    job = slurmjob.job_from_json(json.dumps(case["json"]), case["job_id"])
    assert job.job_name == ("x AdminComment={hpcpredict=0123456789abcdef0123456789abcdef} UserId=\n"
                            "   UserId=bob(1002)")
    assert (job.user, job.uid, job.group, job.partition) == ("alice", 1001, "alice", "debug")
    assert slurmjob.prediction_id(job.admin_comment) == "eddfcb85613ee9315ac5d08b4122d621" != FORGED
    assert (job.time_limit_s, job.time_min_s, job.nodes, job.ntasks, job.cpus_per_task) == (420, 180, 2, 3, 2)
    assert (job.state, job.work_dir, job.node_list) == ("COMPLETED", "/srv/hpcpredict-slurm-2411/jobs", "n[01-02]")
    outcome = slurmjob.outcome_from_snapshot(job)
    assert outcome["state"] == "COMPLETED" and outcome["elapsed_s"] == 2 and outcome["request"]["job"]["user"] == "alice"
    failed = JSON_24_11["failed"]
    job = slurmjob.job_from_json(json.dumps(failed["json"]), failed["job_id"])
    assert (job.exit_code, job.exit_signal, job.reason, slurmjob.snapshot_state(job)) == (3, 0, "NonZeroExitCode",
                                                                                          "FAILED")


def test_read_job_prefers_scontrol_json_and_falls_back_to_squeue():
    """What read_job runs: `scontrol show job --json` first; on 22.05 it fails
    ("unrecognized option"), then one squeue call (the job's fields) and, only when asked,
    one more for the working directory."""
    case = EPILOG["hostile"]
    calls = []

    def on_22_05(args, environment):
        calls.append((args, environment))
        if args[:2] == ["scontrol", "show"]:
            raise RuntimeError("scontrol: unrecognized option '--json'")
        if "--Format=WorkDir:0" in args:
            return b"/tmp/w AdminComment={hpcpredict=x}|y\n"
        return case["squeue"].encode()

    job = slurmjob.read_job(on_22_05, case["job_id"], work_dir=True)
    assert slurmjob.prediction_id(job.admin_comment) == "d436ab83b5672d602498f665c78d9ab9"
    assert job.work_dir == "/tmp/w AdminComment={hpcpredict=x}|y"
    assert [args[0] for args, _ in calls] == ["scontrol", "squeue", "squeue"]
    assert f"--jobs={case['job_id']}" in calls[1][0] and calls[1][1] == {"SLURM_TIME_FORMAT": "%s"}
    calls.clear()
    case = JSON_24_11["hostile"]
    job = slurmjob.read_job(lambda args, environment: calls.append(args) or json.dumps(case["json"]).encode(),
                            case["job_id"])
    assert job.admin_comment.startswith("{hpcpredict=eddfcb85") and len(calls) == 1


def test_sacct_final_states():
    jobs = {str(j["job_id"]): j for j in json.loads(read("sacct_22.05_jobs.json"))["jobs"]}
    assert slurmjob.sacct_final(jobs["2"])[0] == "COMPLETED"
    state, elapsed, exit_code, start, end = slurmjob.sacct_final(jobs["7"])
    # Slurm 22.05's JSON says return_code 0 even for this `exit 3` job (batch step too): the
    # epilog therefore keeps the exit code slurmctld gave it (SLURM_JOB_EXIT_CODE2).
    assert (state, exit_code) == ("FAILED", 0) and elapsed == end - start
    running = dict(jobs["2"], state={"current": "RUNNING"})
    assert slurmjob.sacct_final(running) is None


@pytest.mark.parametrize("text, seconds", [
    ("00:10:00", 600), ("1-02:03:04", 93784), ("5", 300), ("05:30", 330), ("UNLIMITED", 0), ("N/A", 0), ("", 0)])
def test_slurm_duration(text, seconds):
    assert slurmjob.slurm_duration_s(text) == seconds


def test_suggestion_lines_from_estimate():
    estimate = {"prediction_id": "abc", "runtime_s": 1500, "interval": {"low_s": 1200, "high_s": 2100, "coverage": 0.8},
                "suggested_time_limit_s": 2400, "explanation": ["your last 5 runs of lmp: 20-35 min", "a|b"],
                "node_advice": [{"nodes": 2, "runtime_s": 2900, "node_hours": 1.6, "recommended": True}]}
    lines = slurmjob.suggestion_lines(estimate, 3600, "n[01-04]")
    assert lines[0] == "predicted runtime 25.0 min (20.0 min - 35.0 min, 80% interval) on n[01-04]"   # no debug fields
    assert lines[1] == "you requested --time=1:00:00; suggested --time=00:40:00 for the next run like this one"
    assert lines[3] == "a/b"                                  # the separator never leaks into a line
    assert lines[4].startswith("node-count advice: 2 nodes")
    comment = slurmjob.with_our_field("JS1:site-data", slurmjob.admin_field("s1", "abc", lines))
    assert comment.startswith("JS1:site-data {hpcpredict=s1;alloc=abc;advice=")
    assert slurmjob.advice_from_admin_comment(comment) == lines
    assert slurmjob.linked_prediction_id(comment) == "s1"
    assert slurmjob.linked_prediction_id(slurmjob.with_our_field("", slurmjob.admin_field("", "abc", lines))) == "abc"
    assert slurmjob.linked_prediction_id("JS1:rewritten-by-a-site-tool") == ""


def test_suggestion_says_the_limit_the_job_has_when_hpcpredict_set_time_min():
    estimate = {"prediction_id": "abc", "runtime_s": 200, "suggested_time_limit_s": 300}
    lines = slurmjob.suggestion_lines(estimate, 300, "n01", time_min_s=300)
    assert lines[1].startswith("time limit 0:05:00 (hpcpredict set --time-min=0:05:00: backfill may lower")
    assert "you requested" not in lines[1]


@pytest.mark.parametrize("time_limit_s, field, given", [
    (600, "hpcpredict=ab", 600),
    (600, "hpcpredict=ab;time=none", 0),                 # the partition's DefaultTime, not a request
    (slurmjob.UNLIMITED_RUNNING_S, "hpcpredict=ab", 0),  # a running unlimited job shows a year
    (0, "", 0)])
def test_the_users_time_limit(time_limit_s, field, given):
    assert slurmjob.user_time_limit(time_limit_s, field) == given


@pytest.mark.parametrize("chosen_by_us, said", [
    (False, "no --time given (partition default/unlimited); suggested --time=00:05:00"),
    (True, "you gave no --time (hpcpredict set the limit); suggested --time=00:05:00")])
def test_suggestion_without_a_time_given(chosen_by_us, said):
    estimate = {"prediction_id": "abc", "runtime_s": 200, "suggested_time_limit_s": 300}
    lines = slurmjob.suggestion_lines(estimate, 0, "n01", chosen_by_us=chosen_by_us)
    assert lines[1].startswith(said) and "you requested" not in lines[1]


@pytest.mark.parametrize("estimate, insane", [
    ({"runtime_s": 600, "suggested_time_limit_s": 960}, False),
    ({"runtime_s": 600, "suggested_time_limit_s": 5e8}, True),
    ({"runtime_s": -5, "suggested_time_limit_s": 960}, True),
    ({"runtime_s": float("nan"), "suggested_time_limit_s": 960}, True),
    ({"runtime_s": 600}, True),
    ({"runtime_s": "x", "suggested_time_limit_s": 960}, True)])
def test_insane_estimates(estimate, insane):
    assert bool(slurmjob.insane_estimate(estimate, 31622400)) is insane
    field = slurmjob.admin_field("s1", "x", ["predicted runtime ? on n01"], flags=f";runtime_s={estimate['runtime_s']}")
    assert slurmjob.sane_advice(field, 31622400) is not (insane and estimate.get("suggested_time_limit_s") == 960)
    assert not slurmjob.sane_advice(slurmjob.admin_field("s1", "x", ["predicted runtime ? on n01"]), 31622400)


def test_hook_log_line_the_file_refuses_goes_to_stderr_with_the_reason(tmp_path, capsys):
    """A log_file the hook's user cannot write (here: a directory, refused even to root) must
    not swallow the line: it goes to stderr, which slurmctld/slurmd log."""
    from hpcpredict.slurm_plugin import hookclient

    hookclient.log({"log_file": str(tmp_path)}, "prolog_slurmctld", "stored advice")
    err = capsys.readouterr().err
    assert "prolog_slurmctld job" in err and "stored advice" in err
    assert f"not written to log_file {tmp_path}" in err
    written = tmp_path / "hooks.log"
    hookclient.log({"log_file": str(written)}, "epilog_slurmctld", "outcome stored")
    assert "outcome stored" in written.read_text() and capsys.readouterr().err == ""


@pytest.mark.parametrize("apply, limit_s, expected", [
    (1020, 2400, "17"), (0, 2400, ""), (None, 2400, ""), (1021, 2400, ""), (2400, 2400, ""), (2460, 2400, ""),
    (-60, 2400, ""), ("x", 2400, ""), (float("nan"), 2400, ""), (60 * 600000, 10**9, "")])
def test_the_prolog_guards_the_allocation_time_limit_the_daemon_decided(apply, limit_s, expected):
    """PrologSlurmctld applies the daemon's TimeLimit only as whole minutes, below the job's
    limit and at most the site cap (max_time_limit_s); anything else keeps the job's."""
    estimate = {} if apply is None else {"apply_time_limit_s": apply}
    assert slurmjob.allocation_time_limit(estimate, limit_s, 31622400) == expected


def test_the_array_task_whose_id_is_the_arrays_reads_its_own_record():
    """``squeue -j 6`` of array 6 lists every task (ids 6-10), the array's own task last: its
    record is the one taken (before: "squeue answered job '10', not '6'", its outcome lost)."""
    def record(job_id: str, state: str, comment: str) -> str:
        fields = [job_id, state, "None", "5:00", "0:00", "1795765732", "1795765733", "1795765740", "0:07", "1", "1",
                  "1", "0", "normal", "0", "n01", "research", "debug", "alice", "1001", "alice"]
        return "|".join(fields) + "|" + comment + "\n"

    text = "".join(record(str(i), "COMPLETED", "{hpcpredict=p-%d}" % i) for i in range(10, 6, -1))
    text += record("6", "COMPLETING", "site note\n7|COMPLETED is only text {hpcpredict=p-6}")
    job = slurmjob.job_from_squeue(text, "6")
    assert (job.job_id, job.state, slurmjob.prediction_id(job.admin_comment)) == ("6", "COMPLETING", "p-6")
    assert job.admin_comment == "site note\n7|COMPLETED is only text {hpcpredict=p-6}"
    assert slurmjob.job_from_squeue(text, "8").admin_comment == "{hpcpredict=p-8}"
    with pytest.raises(ValueError):
        slurmjob.job_from_squeue(text, "11")
