"""daemon/forecast/queue.py on real squeue output of the 22.05 test cluster (tests/data/slurm/SOURCES.md)."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from hpcpredict.daemon.forecast.queue import QueueError, parse_squeue, snapshot_of, squeue_argv
from hpcpredict.daemon.forecast.types import RuntimeBelief

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
CAPTURE = (DATA / "squeue_forecast_22.05.txt").read_text()


def test_real_capture_reads_every_job_with_its_fields():
    jobs = {job.job_id: job for job in parse_squeue(CAPTURE)}
    assert sorted(jobs) == ["1", "2", "3", "4", "5", "6", "7_1", "7_2", "7_3"]
    running = jobs["1"]
    assert running.running and running.user == "alice" and running.cpus == 32
    assert running.time_limit_s == 600 and running.start_s == 1796207263
    assert running.prediction_id == "ebec413db4b101b76c74ec009136450f"   # the AdminComment's, past its "|"s
    assert jobs["2"].time_min_s == 120 and jobs["2"].time_limit_s == 300 and jobs["2"].cpus == 2
    assert jobs["3"].time_limit_s == math.inf and jobs["3"].time_min_s is None
    assert jobs["5"].time_limit_s == 86400 and jobs["5"].start_s is None       # Slurm planned no start
    assert jobs["2"].start_s == 1796207863                                    # squeue --start's
    assert jobs["4"].priority == 0                                            # held


def test_snapshot_orders_pending_by_priority_and_leaves_held_jobs_out():
    beliefs = {"1": RuntimeBelief(60.0, 0.3)}
    snapshot, left_out = snapshot_of(parse_squeue(CAPTURE), taken_s=1796207170.0, total_cpus=32,
                                     planning_rule="kill", max_jobs=100, belief_of=lambda job: beliefs.get(job.job_id))
    assert left_out == 0 and snapshot.total_cpus == 32 and snapshot.planning_rule == "kill"
    pending = sorted((job for job in snapshot.jobs if job.start_s is None), key=lambda job: job.priority_rank)
    assert [job.job_id for job in pending] == ["2", "3", "5", "6", "7_1", "7_2", "7_3"]   # 4 is held
    assert [job.priority_rank for job in pending] == list(range(7))
    running = [job for job in snapshot.jobs if job.start_s is not None]
    assert [(job.job_id, job.belief) for job in running] == [("1", RuntimeBelief(60.0, 0.3))]


def test_max_jobs_keeps_running_jobs_and_the_first_pending_ones():
    snapshot, left_out = snapshot_of(parse_squeue(CAPTURE), taken_s=0.0, total_cpus=32, planning_rule="kill",
                                     max_jobs=3, belief_of=lambda job: None)
    assert [job.job_id for job in snapshot.jobs] == ["1", "2", "3"] and left_out == 5
    with pytest.raises(QueueError, match="1 running jobs: more than \\[forecast\\] max_jobs = 0"):
        snapshot_of(parse_squeue(CAPTURE), taken_s=0.0, total_cpus=32, planning_rule="kill", max_jobs=0,
                    belief_of=lambda job: None)


@pytest.mark.parametrize("text, message", [
    ("squeue: error: slurm_load_jobs error: Unable to contact slurm controller\n", "line 1 is not a job record"),
    ("\x00\xff garbage", "line 1 is not a job record"),
    ("12|PENDING|bob|debug\n", "fields where"),                                      # another format
    ("12|PENDING|bob|debug|two|5:00|0:00|1|1|9|\n", "NumCPUs 'two'"),
    ("12|PENDING|bob|debug|2|5:00|0:00|2026-12-02T10:26:01|N/A|9|\n", "SubmitTime .* not epoch seconds"),
    ("12|PENDING|bob|debug|2|soon|0:00|1|N/A|9|\n", "TimeLimit 'soon' is not a Slurm duration"),
    (CAPTURE + "trailing words\n", None),            # a line inside the last AdminComment: it is the comment's
])
def test_garbage_is_a_clear_error(text, message):
    if message is None:
        assert parse_squeue(text)[-1].job_id == "1"
        return
    with pytest.raises(QueueError, match=message):
        parse_squeue(text)


def test_an_empty_queue_is_no_job():
    assert parse_squeue("") == [] and parse_squeue("\n") == []


def test_the_command_adds_the_format_to_the_sites_squeue():
    argv = squeue_argv("squeue -M cluster2")
    assert argv[:3] == ["squeue", "-M", "cluster2"] and "--noheader" in argv and "--array" in argv
    assert argv[-1].startswith("--Format=JobArrayID:0|,State:0|") and argv[-1].endswith(",admin_comment:0")
