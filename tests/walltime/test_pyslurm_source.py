"""The pyslurm accounting source makes the same records as `sacct --json`.

A fake where the real thing cannot run: pyslurm exists only for Slurm 25.11 (PyPI) and builds
only against that release's libslurm; this machine runs Slurm 22.05, so `pyslurm.db.Job`
objects cannot be made here. The stand-ins carry exactly the attributes pyslurm documents for
``pyslurm.db.Job`` (id, name, user_name, group_name, account, partition, qos, submit_time,
start_time, end_time, elapsed_time, time_limit in minutes, state, num_nodes, cpus, exit_code),
each filled from the same slurmdbd field the real `sacct --json` of the test cluster printed
(tests/data/slurm/sacct_22.05_jobs.json), the way pyslurm derives it: ``cpus`` and
``num_nodes`` from the allocated TRES, 0 ("not set") as None. The stand-in ``pyslurm.db``
module records the JobFilter it is given, as far as the documented ``Jobs.load(db_filter)``
goes.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpcpredict.daemon.errors import CommandError, ParseError
from hpcpredict.daemon.lab.history.pyslurm_source import load_pyslurm_jobs, records_from_pyslurm_jobs, since_timestamp
from hpcpredict.daemon.lab.history.sacct import read_sacct_json

DUMP = Path(__file__).resolve().parents[1] / "data" / "slurm" / "sacct_22.05_jobs.json"


def _unset(value):
    return None if value in (0, None) else value


def standin_job(row: dict) -> SimpleNamespace:
    """A pyslurm.db.Job stand-in from one slurmdbd job record as `sacct --json` printed it."""
    times = row["time"]
    allocated = {t["type"]: t["count"] for t in row["tres"]["allocated"]}
    return SimpleNamespace(
        id=row["job_id"], name=row["name"], user_name=row["user"], group_name=row["group"],
        account=row["account"], partition=row["partition"], qos=row["qos"], cluster=row["cluster"],
        submit_time=_unset(times["submission"]), start_time=_unset(times["start"]), end_time=_unset(times["end"]),
        elapsed_time=_unset(times["elapsed"]), time_limit=_unset(times["limit"]), state=row["state"]["current"],
        num_nodes=allocated.get("node"), cpus=allocated.get("cpu"), exit_code=row["exit_code"]["return_code"],
    )


def test_same_records_as_sacct_json_on_real_accounting():
    text = DUMP.read_text()
    from_sacct = read_sacct_json(text)
    from_pyslurm = records_from_pyslurm_jobs([standin_job(row) for row in json.loads(text)["jobs"]])
    assert len(from_sacct) == 3
    assert from_pyslurm == from_sacct          # every field (JobRecord equality)
    assert [r.state for r in from_pyslurm] == [r.state for r in from_sacct]


BASE = dict(id=11, name="lmp", user_name="ann", group_name="ann", account="a", partition="p", qos="normal",
            submit_time=1000, start_time=1060, end_time=4660, elapsed_time=3600, time_limit=120,
            state="COMPLETED", num_nodes=2, cpus=8, exit_code=0)


@pytest.mark.parametrize("change, expected", [
    ({}, dict(runtime_s=3600.0, requested_time_s=7200.0, state="COMPLETED", nodes=2, requested_procs=8)),
    ({"time_limit": "PartitionLimit"}, dict(requested_time_s=0.0)),
    ({"time_limit": "UNLIMITED"}, dict(requested_time_s=0.0)),
    ({"time_limit": None}, dict(requested_time_s=0.0)),
    ({"time_limit": 60}, dict(state="TIMEOUT", requested_time_s=3600.0)),        # reached its limit
    ({"state": "TIMEOUT"}, dict(state="TIMEOUT")),
    ({"state": "CANCELLED", "start_time": None, "elapsed_time": None},           # cancelled while pending
     dict(state="CANCELLED", start_time=0.0, runtime_s=0.0)),
    ({"elapsed_time": None}, dict(runtime_s=0.0)),                                # as sacct --json's 0
    ({"exit_code": 2, "state": "FAILED"}, dict(exit_code=2, state="FAILED")),
    ({"state": None}, dict(state="UNKNOWN")),
    ({"user_name": None, "qos": None}, dict(user="", qos="")),
])
def test_attribute_rules(change, expected):
    [record] = records_from_pyslurm_jobs([SimpleNamespace(**{**BASE, **change})])
    assert {key: getattr(record, key) for key in expected} == expected


def test_group_name_as_a_method_is_called():
    """Some pyslurm releases define ``group_name`` without @property (a bound method)."""
    job = SimpleNamespace(**{**BASE, "group_name": lambda: "physics"})
    assert records_from_pyslurm_jobs([job])[0].group == "physics"


@pytest.mark.parametrize("change, part", [
    ({"cpus": "8"}, "11"),
    ({"submit_time": "yesterday"}, "11"),
    ({"id": "12a"}, "12a"),
    ({"elapsed_time": True}, "11"),
])
def test_bad_attributes_are_a_parse_error_naming_the_job(change, part):
    jobs = [SimpleNamespace(**BASE), SimpleNamespace(**{**BASE, **change})]
    with pytest.raises(ParseError, match="job #1") as raised:
        records_from_pyslurm_jobs(jobs, source="pyslurm -S now-7days")
    assert raised.value.part == part


def test_missing_attribute_is_a_parse_error():
    job = SimpleNamespace(**{k: v for k, v in BASE.items() if k != "elapsed_time"})
    with pytest.raises(ParseError, match="elapsed_time"):
        records_from_pyslurm_jobs([job])


class StandinDb:
    """``pyslurm.db`` as far as Jobs.load(JobFilter(...)) goes; records the filter it got."""

    def __init__(self, loaded):
        self.loaded, self.filters = loaded, []
        db = self

        class JobFilter:
            def __init__(self, **kwargs):
                self.kwargs = kwargs

        class Jobs:
            @staticmethod
            def load(db_filter=None, db_connection=None):
                db.filters.append(db_filter.kwargs)
                if isinstance(db.loaded, Exception):
                    raise db.loaded
                return db.loaded

        self.JobFilter, self.Jobs = JobFilter, Jobs


@pytest.mark.parametrize("loaded", [
    [SimpleNamespace(**BASE)],                           # pyslurm 22.05: a list
    {11: SimpleNamespace(**BASE)},                       # 23.02+: a mapping of id (and cluster) -> job
])
def test_load_passes_the_window_and_cluster(loaded):
    module = SimpleNamespace(db=StandinDb(loaded))
    jobs = load_pyslurm_jobs(module, since=1000.7, until=5000.2, cluster="tetralith")
    assert module.db.filters == [{"start_time": 1000, "end_time": 5000, "clusters": ["tetralith"]}]
    assert [job.id for job in jobs] == [11]
    load_pyslurm_jobs(module, since=0, until=1)
    assert module.db.filters[-1]["clusters"] is None     # the local cluster


def test_load_failure_is_a_command_error():
    module = SimpleNamespace(db=StandinDb(RuntimeError("Failed to get Jobs from slurmdbd")))
    with pytest.raises(CommandError, match="pyslurm.db.Jobs.load .*Failed to get Jobs from slurmdbd"):
        load_pyslurm_jobs(module, since=0, until=1)


@pytest.mark.parametrize("text, expected", [
    ("now", 100000.0), ("now-7days", 100000.0 - 7 * 86400), ("now-30", 99970.0), ("NOW-2Hours", 92800.0),
    ("now+1weeks", 100000.0 + 7 * 86400), ("now-5minutes", 99700.0),
])
def test_since_relative(text, expected):
    assert since_timestamp(text, now=100000.0) == expected


def test_since_date_is_local_time_as_sacct_reads_it():
    from datetime import datetime

    assert since_timestamp("2026-11-01") == datetime(2026, 11, 1).timestamp()
    assert since_timestamp("2026-11-01T10:30") == datetime(2026, 11, 1, 10, 30).timestamp()


@pytest.mark.parametrize("text", ["yesterday", "now-7fortnights", "2026-13-01", "", "now-"])
def test_since_bad_value_is_a_parse_error(text):
    with pytest.raises(ParseError, match="--since") as raised:
        since_timestamp(text, now=0.0)
    assert raised.value.part == text

