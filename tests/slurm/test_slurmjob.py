"""Parsers of the hook scripts (slurm_plugin/slurmjob.py) on real Slurm 22.05 output."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcpredict.slurm_plugin import slurmjob

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("name, exit_code2, state, exit_code", [
    ("epilog_snapshot_completed.txt", "0:0", "COMPLETED", 0),
    ("epilog_snapshot_failed.txt", "3:0", "FAILED", 3),
    ("epilog_snapshot_timeout.txt", "0:0", "TIMEOUT", 0),
    ("epilog_snapshot_cancelled.txt", "0:0", "COMPLETED", 0),  # why the epilog waits for sacct
])
def test_outcome_from_epilog_snapshot(name, exit_code2, state, exit_code):
    job = slurmjob.parse_scontrol_job(read(name))
    assert job["JobState"] == "COMPLETING"
    outcome = slurmjob.outcome_from_snapshot(job, exit_code2)
    assert (outcome["state"], outcome["exit_code"]) == (state, exit_code)
    assert outcome["end_time"] >= outcome["start_time"] > 0
    assert outcome["elapsed_s"] == outcome["end_time"] - outcome["start_time"]
    assert outcome["request"]["job"]["user"] == "alice"        # no prediction id: request from scontrol


def test_timeout_snapshot_elapsed_beyond_limit():
    outcome = slurmjob.outcome_from_snapshot(slurmjob.parse_scontrol_job(read("epilog_snapshot_timeout.txt")))
    assert outcome["elapsed_s"] == 62 and outcome["request"]["time_limit_s"] == 60


def test_multiline_job_keeps_admin_comment_whole():
    job = slurmjob.parse_scontrol_job(read("scontrol_show_job_with_advice.txt"))
    assert job["NodeList"] == "n[01-04]" and job["NumNodes"] == "4" and job["TimeMin"] == "00:02:00"
    comment = job["AdminComment"]
    assert slurmjob.prediction_id(comment) == "89df71cfe2f77438c0e070078bfe5d89"
    lines = slurmjob.advice_from_admin_comment(comment)
    assert lines[0].startswith("predicted runtime 1 min 38 s") and "id=8a776ca2eee6a4c89ca70ecdc0774572" in lines[0]
    assert lines[1] == "you requested --time=0:10:00; suggested --time=0:05:00 for the next run like this one"
    assert job["StdOut"].endswith("hello-2.out")
    outcome = slurmjob.outcome_from_snapshot(job)
    assert outcome["prediction_id"] == "89df71cfe2f77438c0e070078bfe5d89" and "request" not in outcome


def test_one_line_form_and_request():
    job = slurmjob.parse_scontrol_job(read("scontrol_show_job_oneline.txt"))
    request = slurmjob.job_request(job, b"#!/bin/sh\nsrun ./hello.sh\n")
    assert request["job"] == {"user": "bob", "account": "research", "partition": "debug", "job_name": "notime",
                              "qos": "normal", "group": "bob"}
    assert request["resources"]["nodes"] == 2 and request["script"] == "IyEvYmluL3NoCnNydW4gLi9oZWxsby5zaAo="
    assert request["time_limit_s"] % 60 == 0 and request["time_limit_s"] > 0


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
    assert lines[0] == ("predicted runtime 25.0 min (20.0 min - 35.0 min, 80% interval) on n[01-04] "
                        "[runtime_s=1500 low_s=1200 high_s=2100 id=abc]")
    assert lines[1] == "you requested --time=1:00:00; suggested --time=0:40:00 for the next run like this one"
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


@pytest.mark.parametrize("estimate, insane", [
    ({"runtime_s": 600, "suggested_time_limit_s": 960}, False),
    ({"runtime_s": 600, "suggested_time_limit_s": 5e8}, True),
    ({"runtime_s": -5, "suggested_time_limit_s": 960}, True),
    ({"runtime_s": float("nan"), "suggested_time_limit_s": 960}, True),
    ({"runtime_s": 600}, True),
    ({"runtime_s": "x", "suggested_time_limit_s": 960}, True)])
def test_insane_estimates(estimate, insane):
    assert bool(slurmjob.insane_estimate(estimate, 31622400)) is insane
    line = f"predicted runtime ? on n01 [runtime_s={estimate['runtime_s']} low_s=0 high_s=0 id=x]"
    assert slurmjob.sane_advice(line, 31622400) is not (insane and estimate.get("suggested_time_limit_s") == 960)


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
