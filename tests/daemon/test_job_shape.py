"""One job shape: a validated request maps onto the JobRecord history uses in one place."""
import dataclasses

import pytest

from hpcpredict.daemon.jobspec import JobSpec
from hpcpredict.daemon.records import TIMEOUT, JobRecord


def spec(**changes):
    base = JobSpec(user="ann", application="lmp", account="phys", partition="batch", job_name="run1",
                   group="g", qos="normal", inputs={"size": 400.0}, nodes=4, ntasks=64, cpus_per_task=2,
                   time_limit_s=7200, submit_time=1.7e9, job_id="42")
    return dataclasses.replace(base, **changes)


def test_at_submission_the_record_has_no_outcome():
    job = spec().record()
    assert job == JobRecord(job_id="42", user="ann", submit_time=1.7e9, requested_time_s=7200.0, application="lmp",
                            job_name="run1", group="g", account="phys", partition="batch", qos="normal", nodes=4,
                            requested_procs=128)
    assert job.runtime_s == -1.0 and job.inputs == {"size": 400.0}


@pytest.mark.parametrize("changes, requested, procs", [
    ({"ntasks": 0}, 7200.0, 4),                      # only -N: the node count is the size
])
def test_request_and_size_rules(changes, requested, procs):
    job = spec(**changes).record()
    assert (job.requested_time_s, job.procs) == (requested, procs)


def test_with_an_outcome_it_is_the_ended_job():
    job = spec().record(runtime_s=7200.0, state=TIMEOUT, start_time=1.7e9 + 10, end_time=1.7e9 + 7210)
    assert job.censored and job.runtime_s == 7200.0 and job.user == "ann"
