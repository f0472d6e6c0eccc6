"""The online evaluator: no peeking into the future, the metrics, and the CLI command."""
import json
import subprocess
import sys

import numpy as np
import pytest

from hpcpredict.daemon.lab.history.evaluation import (evaluate_trace, replay, score, score_series)
from hpcpredict.daemon.history.predictors import OnlinePredictor, UserRequestPredictor, point
from hpcpredict.daemon.lab.history.traces import read_trace
from hpcpredict.daemon.records import JobRecord

KEYS = ["user", "last2", "alea-max5", "cesnet", "ecmwf", "hpcpredict", "hpcpredict-bound"]
FIELDS = {"n", "accuracy", "under_rate", "kill_rate", "median_ratio", "mae_s"}


class Witness(OnlinePredictor):
    """Records what it was shown; answers the mean runtime seen so far."""

    name = "witness"

    def __init__(self):
        self.seen: list[JobRecord] = []
        self.checks = 0

    def observe(self, record):
        self.seen.append(record)

    def predict(self, job, risk=0.03):
        self.checks += 1
        assert all(r.end_time <= job.submit_time for r in self.seen), "saw a job that had not ended"
        mean = sum(r.runtime_s for r in self.seen) / len(self.seen) if self.seen else 60.0
        return point(self.name, mean, job, "mean so far")


def test_replay_never_shows_a_job_that_ended_after_the_submit_time(kth_slice):
    jobs = read_trace(kth_slice)
    witness = Witness()
    replay(jobs, {"witness": witness})
    assert witness.checks == len(jobs) == 2000
    ends = [r.end_time for r in witness.seen]
    assert ends == sorted(ends)                       # observed in end-time order
    last_submit = max(j.submit_time for j in jobs)
    # completeness: every job that ended before the last submission was shown
    assert len(witness.seen) == sum(j.end_time <= last_submit for j in jobs)
    # and jobs long-running at the end of the slice were not (KTH jobs wait hours to days)
    assert len(witness.seen) < len(jobs)


def test_replay_with_simultaneous_end_and_submit():
    a = JobRecord("a", "u", 0.0, runtime_s=100.0, requested_time_s=200.0, end_time=100.0)
    b = JobRecord("b", "u", 100.0, runtime_s=50.0, requested_time_s=200.0, end_time=150.0)
    c = JobRecord("c", "u", 120.0, runtime_s=50.0, requested_time_s=200.0, end_time=170.0)
    witness = Witness()
    replay([c, b, a], {"witness": witness})
    assert [r.job_id for r in witness.seen] == ["a"]     # b still running when c arrives


def test_metrics_hand_computed():
    predicted = np.array([50.0, 200.0, 100.0, 400.0])
    runtime = np.array([100.0, 100.0, 100.0, 800.0])
    within = np.array([True, True, True, False])      # the last one hit its limit
    s = score_series(predicted, runtime, within)
    assert s.n == 4
    assert s.accuracy == pytest.approx((0.5 + 0.5 + 1.0 + 0.5) / 4)
    assert s.under_rate == pytest.approx(0.5)
    assert s.kill_rate == pytest.approx(1 / 3)
    assert s.median_ratio == pytest.approx(0.75)
    assert s.mae_s == pytest.approx((50 + 100 + 0 + 400) / 4)


def test_user_request_has_no_kills_on_a_real_trace(traces):
    jobs = read_trace(traces / "hpc2n-subset.swf")[:800]
    scores = score(replay(jobs, {"user": UserRequestPredictor()}))
    known = [j for j in jobs if j.runtime_s >= 0]
    assert len(known) < len(jobs)                       # this slice has jobs without a runtime
    assert scores["user"].kill_rate == 0.0 and scores["user"].n == len(known)


def test_every_predictor_scored_on_a_real_slice(kth_slice):
    scores = evaluate_trace(read_trace(kth_slice))
    assert list(scores) == KEYS
    assert all(s.n == 2000 and 0 < s.accuracy <= 1 for s in scores.values())
    # the bound is at least the point estimate for every job, so it kills less
    assert scores["hpcpredict-bound"].kill_rate <= scores["hpcpredict"].kill_rate
    assert scores["hpcpredict-bound"].under_rate <= scores["hpcpredict"].under_rate


def cli(*args):
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "evaluate", "walltime", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_json(kth_slice):
    done = cli(str(kth_slice), "--format", "swf", "--risk", "0.05", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert list(result) == KEYS
    assert all(set(v) == FIELDS for v in result.values())
    assert result["user"]["under_rate"] == 0.0


def test_cli_table_on_sacct_csv(traces):
    done = cli(str(traces / "eagle-sample-1000.csv"))
    assert done.returncode == 0, done.stderr
    assert "hpcpredict-bound" in done.stdout and "accuracy" in done.stdout


@pytest.mark.parametrize("args,message", [
    (["--risk", "1.5"], "--risk: must be between 0 and 1"),
    (["--format", "sacct-json"], "invalid JSON"),
])
def test_cli_errors_are_one_line(kth_slice, args, message):
    done = cli(str(kth_slice), *args)
    assert done.returncode == 1
    assert done.stderr.startswith("hpcpredict: ") and message in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_missing_file(tmp_path):
    done = cli(str(tmp_path / "nope.swf"))
    assert done.returncode == 1 and "cannot read trace" in done.stderr
