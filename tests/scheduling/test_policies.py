"""The policies set exactly what the hook's plan_limits decides, and the online predictions
never see a job that had not ended."""
import math

import pytest

from hpcpredict.daemon.estimates import RuntimeEstimate
from hpcpredict.daemon.history.traces import read_trace
from hpcpredict.daemon.scheduling import policies
from hpcpredict.daemon.scheduling.workload import SimJob, sim_jobs, trace_machine_size
from hpcpredict.daemon.walltime_policy import plan_limits


def prediction(bound, fallback=False):
    return RuntimeEstimate(runtime_s=bound / 2, bound_s=bound, low_s=bound / 3, high_s=bound, coverage=0.8,
                           explanation=(), fallback=fallback, model_name="test")


def job(request=7200.0, work=1000.0):
    return SimJob(0, "1", 0.0, 4, work, request, request if request else 366 * 86400.0)


@pytest.mark.parametrize("bound, requested, fallback", [
    (1000, 7200, False), (9000, 7200, False), (1000, 7200, True), (1000, 0, False), (math.nan, 7200, False),
    (-5, 7200, False), (5e8, 0, False), (100, 7200, False), (7150, 7200, False)])
def test_hpcpredict_sets_what_plan_limits_decides(bound, requested, fallback):
    change = plan_limits(bound_s=bound, requested_s=requested, fallback=fallback)
    before = job(requested)
    after = policies.hpcpredict(before, prediction(bound, fallback))
    assert after.time_min_s == (change.time_min_s or 0.0)
    assert after.limit_s == (change.time_limit_s or before.limit_s)
    assert not after.soft_time_min
    assert policies.shortened(before, after) == (change.time_min_s is not None or change.time_limit_s is not None)


def test_time_min_is_the_bound_rounded_up_not_the_point_estimate():
    after = policies.hpcpredict(job(7200), prediction(1000))
    assert after.time_min_s == 1020 and after.limit_s == 7200


def test_hpcpredict_time_replaces_the_request_by_the_bound_and_never_raises_it():
    assert policies.hpcpredict_time(job(7200), prediction(1000)).limit_s == 1020
    assert policies.hpcpredict_time(job(7200), prediction(9000)).limit_s == 7200
    assert policies.hpcpredict_time(job(7200), prediction(1000, fallback=True)).limit_s == 7200


def test_soft_and_oracle_variants():
    soft = policies.hpcpredict_soft(job(7200), prediction(1000))
    assert (soft.time_min_s, soft.soft_time_min, soft.limit_s) == (1020, True, 7200)
    point = policies.hpcpredict_soft_point(job(7200), prediction(1000))    # the point estimate, 500 s
    assert (point.time_min_s, point.soft_time_min, point.limit_s) == (540, True, 7200)
    assert policies.hpcpredict_soft_point(job(7200), prediction(1000, fallback=True)).time_min_s == 0
    assert policies.oracle(job(7200, work=1234.0), None).limit_s == 1234.0
    assert policies.oracle_time_min(job(7200, work=1234.0), None).time_min_s == 1260


def test_online_predictions_only_see_jobs_ended_before_submission(kth_slice):
    records = read_trace(kth_slice)[:400]

    class Witness:
        def __init__(self):
            self.seen = []

        def observe(self, record):
            self.seen.append(record)

        def submit(self, record, risk, explain=False):
            assert all(r.end_time <= record.submit_time for r in self.seen)
            return prediction(600.0)

    witness = Witness()
    answers = policies.online_predictions(records, 0.03, model=witness)
    assert len(answers) == len(records) and len(witness.seen) > 300


def test_machine_size_from_the_header_and_dropped_jobs(tmp_path, kth_slice):
    assert trace_machine_size(kth_slice) == 100
    path = tmp_path / "nodes.swf"
    path.write_text("; MaxNodes: 8\n1 0 1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
                    "2 5 1 10 16 -1 -1 16 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
                    "3 9 1 -1 4 -1 -1 4 60 -1 0 1 1 -1 -1 -1 -1 -1\n")
    assert trace_machine_size(path) == 8
    load = sim_jobs(read_trace(path), 8)
    assert [j.job_id for j in load.jobs] == ["1"]
    assert dict(load.dropped) == {"larger_than_machine": 1, "unknown_runtime": 1}
    assert trace_machine_size(tmp_path / "nodes.swf") == 8
    bare = tmp_path / "bare.swf"
    bare.write_text("1 0 1 10 4 -1 -1 4 60 -1 1 1 1 -1 -1 -1 -1 -1\n")
    assert trace_machine_size(bare) is None
