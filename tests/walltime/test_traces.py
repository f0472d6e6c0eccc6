"""Trace readers on real traces, plus negative inputs naming the faulty line and part."""
import json
import logging

import pytest

from hpcpredict.daemon.errors import ParseError
from hpcpredict.daemon.lab.history.sacct import parse_duration
from hpcpredict.daemon.lab.history.traces import (read_sacct_csv, read_sacct_json, read_sacct_parsable,
                                              read_swf, read_trace, sniff_format)


def test_kth_swf_fields(traces):
    jobs = read_trace(traces / "KTH-SP2.swf")
    assert len(jobs) == 28481
    first = jobs[0]
    # "1 0 964980 97225 56 -1 -1 56 210000 -1 1 1 1 -1 -1 -1 -1 -1"
    assert (first.job_id, first.user, first.group) == ("1", "1", "1")
    start = 843480031.0         # the header's UnixStartTime: 1996-09-23, the trace's real dates
    assert (first.submit_time, first.runtime_s, first.requested_time_s) == (start, 97225.0, 210000.0)
    assert (first.allocated_procs, first.requested_procs) == (56, 56)
    assert first.start_time == start + 964980.0 and first.end_time == start + 964980.0 + 97225.0
    assert first.application == "" and first.state == "COMPLETED"
    states = {j.state for j in jobs}
    assert states == {"COMPLETED", "FAILED", "TIMEOUT"}
    # runtime >= request is a kill at the limit, whatever status says
    assert all(j.censored == (j.runtime_s >= j.requested_time_s) for j in jobs)
    assert sum(j.state == "TIMEOUT" for j in jobs) == 513


def test_hpc2n_fractional_fields_and_partition(traces):
    jobs = read_trace(traces / "hpc2n-subset.swf")
    assert len(jobs) == 3170
    assert jobs[0].partition == "1" and jobs[0].runtime_s == 31405.0


@pytest.mark.parametrize("status,runtime,expected", [
    (1, 60, "COMPLETED"), (0, 60, "FAILED"), (5, 60, "CANCELLED"), (7, 60, "UNKNOWN"), (1, 120, "TIMEOUT"),
])
def test_swf_status_mapping(status, runtime, expected):
    (job,) = read_swf(f"4 10 5 {runtime} 2 -1 -1 2 120 -1 {status} 9 3 42 1 2 -1 -1\n")
    assert job.state == expected
    assert job.application == "42" and job.qos == "1" and job.partition == "2"


@pytest.mark.parametrize("line,part", [
    ("1 0 10 abc 8 -1 -1 8 7200 -1 1 3 2 -1 1 -1 -1 -1", "abc"),
    ("1 0 10 3600 8 -1 -1 8 7200 -1 nan 3 2 -1 1 -1 -1 -1", "nan"),
    ("1 0 10 3600", "1 0 10 3600"),
    ("1 -1 10 3600 8 -1 -1 8 7200 -1 1 3 2 -1 1 -1 -1 -1", "-1"),
])
def test_swf_bad_line_strict_names_line_and_part(line, part):
    with pytest.raises(ParseError) as error:
        read_swf(f"; header\n{line}\n", source="x.swf", strict=True)
    assert error.value.line == 2 and error.value.source == "x.swf"
    assert error.value.part == part


def test_swf_bad_lines_skipped_with_counted_warning(caplog):
    good = "1 0 10 3600 8 -1 -1 8 7200 -1 1 3 2 -1 1 -1 -1 -1"
    with caplog.at_level(logging.WARNING):
        jobs = read_swf(f"{good}\ngarbage here\n{good}\n1 2 x\n", source="t.swf")
    assert len(jobs) == 2
    assert "skipped 2 malformed" in caplog.text and "t.swf:2" in caplog.text


def test_swf_only_bad_lines_raises():
    with pytest.raises(ParseError):
        read_swf("not a trace\n")


def test_sacct_json_real_22_05(traces):
    jobs = read_trace(traces / "sacct_22.05_jobs.json")
    assert [j.job_id for j in jobs] == ["2", "3", "7"]
    two = jobs[0]
    assert (two.user, two.group, two.account, two.partition) == ("alice", "alice", "research", "debug")
    assert (two.application, two.nodes, two.requested_procs) == ("hello-mpi", 4, 8)
    assert (two.runtime_s, two.requested_time_s) == (5.0, 600.0)  # time.limit is minutes
    assert two.submit_time == 1795241861.0 and two.end_time == 1795241868.0
    assert jobs[2].state == "FAILED"


def test_sacct_json_wrapped_numbers_of_newer_slurm():
    job = {"job_id": 5, "user": "u", "name": "n", "state": {"current": ["TIMEOUT"]},
           "time": {"submission": 100, "start": 110, "end": 170, "elapsed": 60,
                    "limit": {"set": True, "infinite": False, "number": 1}},
           "allocation_nodes": {"set": True, "infinite": False, "number": 2}, "required": {"CPUs": 4}}
    (record,) = read_sacct_json(json.dumps({"jobs": [job]}))
    assert (record.state, record.requested_time_s, record.nodes, record.censored) == ("TIMEOUT", 60.0, 2, True)


@pytest.mark.parametrize("text,part", [
    ('{"jobs": [', ""), ('{"nojobs": []}', "dict"), ('{"jobs": [{"user": "x"}]}', "?"),
    ('{"jobs": [{"job_id": 1, "time": {"elapsed": "soon"}}]}', "1"),
])
def test_sacct_json_negative(text, part):
    with pytest.raises(ParseError) as error:
        read_sacct_json(text, source="s.json")
    assert error.value.source == "s.json" and error.value.part == part


# Hand-written in the layout of `sacct -P -o JobID,User,Group,Account,Partition,JobName,
# Submit,Start,End,Elapsed,Timelimit,State,ExitCode,NNodes,NCPUS` (Slurm 22.05).
PARSABLE = """JobID|User|Group|Account|Partition|JobName|Submit|Start|End|Elapsed|Timelimit|State|ExitCode|NNodes|NCPUS
101|ann|physics|proj1|batch|lmp|2024-03-01T10:00:00|2024-03-01T10:05:00|2024-03-01T11:05:00|01:00:00|1-00:00:00|COMPLETED|0:0|2|64
101.batch|||proj1||batch|2024-03-01T10:05:00|2024-03-01T10:05:00|2024-03-01T11:05:00|01:00:00||COMPLETED|0:0|1|32
101.0|||proj1||lmp|2024-03-01T10:05:01|2024-03-01T10:05:01|2024-03-01T11:04:59|00:59:58||COMPLETED|0:0|2|64
102|bob|chem|proj2|batch|vasp|2024-03-01T10:01:00|2024-03-01T10:06:00|2024-03-01T10:36:00|00:30:00|00:30:00|TIMEOUT|0:15|1|16
103_4|bob|chem|proj2|batch|arr|2024-03-01T10:02:00|Unknown|Unknown|00:00:00|UNLIMITED|CANCELLED by 1001|0:0|1|1
104|cy|bio|proj3|gpu|md|2024-03-01T10:03:00|2024-03-01T10:03:10|2024-03-01T10:03:20|00:10.500|10|FAILED|3:0|1|8
"""


def test_sacct_parsable_skips_steps_and_parses_durations():
    jobs = read_sacct_parsable(PARSABLE, source="p.txt")
    assert [j.job_id for j in jobs] == ["101", "102", "103_4", "104"]
    ann, bob, arr, cy = jobs
    assert (ann.runtime_s, ann.requested_time_s, ann.nodes, ann.requested_procs) == (3600.0, 86400.0, 2, 64)
    assert (ann.group, ann.account, ann.application) == ("physics", "proj1", "lmp")
    assert bob.state == "TIMEOUT" and bob.censored
    assert arr.state == "CANCELLED" and arr.requested_time_s == 0.0 and arr.start_time == -1.0
    assert cy.runtime_s == 10.5 and cy.requested_time_s == 600.0 and cy.exit_code == 3


@pytest.mark.parametrize("text,line,part", [
    ("JobID|User\n1\n", 2, "1"),
    ("JobID|Elapsed\n1|1:2:3:4\n", 2, "1:2:3:4"),
    ("JobID|Submit\n1|yesterday\n", 2, "yesterday"),
    ("nothing useful\n", 1, "nothing useful"),
])
def test_sacct_parsable_negative(text, line, part):
    with pytest.raises(ParseError) as error:
        read_sacct_parsable(text, source="p.txt")
    assert (error.value.line, error.value.part) == (line, part)


@pytest.mark.parametrize("text,seconds", [
    ("00:30:00", 1800.0), ("1-00:00:00", 86400.0), ("2-03", 2 * 86400.0 + 3 * 3600), ("15", 900.0),
    ("1-02:03", 86400.0 + 7200 + 180), ("05:30", 330.0), ("UNLIMITED", 0.0), ("Partition_Limit", 0.0),
])
def test_timelimit_forms(text, seconds):
    assert parse_duration(text, minutes_default=True) == seconds


def test_eagle_csv(traces):
    jobs = read_trace(traces / "eagle-sample-1000.csv")
    assert len(jobs) == 1000
    assert sum(j.state == "TIMEOUT" for j in jobs) == 15
    first = jobs[0]
    assert (first.job_id, first.user, first.account, first.partition) == ("532209", "user0014", "account0003", "partition001")
    assert (first.requested_time_s, first.runtime_s, first.nodes, first.requested_procs) == (172800.0, 99825.0, 10, 10)
    assert first.end_time - first.start_time == pytest.approx(99825.0)


def test_csv_missing_column():
    with pytest.raises(ParseError) as error:
        read_sacct_csv("job_id,user\n1,a\n", source="c.csv")
    assert "run_time" in str(error.value) and error.value.line == 1


def test_csv_bad_number_names_line():
    text = "job_id,user,submit_time,run_time,wallclock_req\n1,a,2019-01-01 00:00:00,12,60\n2,b,2019-01-01 00:00:00,x,60\n"
    with pytest.raises(ParseError) as error:
        read_sacct_csv(text)
    assert error.value.line == 3


@pytest.mark.parametrize("name,expected", [
    ("KTH-SP2.swf", "swf"), ("eagle-sample-1000.csv", "sacct-csv"), ("sacct_22.05_jobs.json", "sacct-json"),
])
def test_sniff(traces, name, expected):
    assert sniff_format((traces / name).read_text()[:5000]) == expected


def test_sniff_parsable():
    assert sniff_format(PARSABLE) == "sacct-parsable"


def test_non_utf8_bytes_are_replaced_with_warning(tmp_path, caplog):
    path = tmp_path / "latin1.txt"
    path.write_bytes(PARSABLE.replace("ann", "J\xf6rg").encode("latin-1"))
    with caplog.at_level(logging.WARNING):
        jobs = read_trace(path)
    assert jobs[0].user == "J\ufffdrg"
    assert "not valid UTF-8" in caplog.text


def test_read_trace_errors(tmp_path):
    with pytest.raises(ParseError, match="cannot read trace"):
        read_trace(tmp_path / "missing.swf")
    path = tmp_path / "x.txt"
    path.write_text("hello world\n")
    with pytest.raises(ParseError, match="use --format"):
        read_trace(path)
    with pytest.raises(ParseError, match="unknown trace format"):
        read_trace(path, "pbs")
