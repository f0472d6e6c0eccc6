"""The bound's calibration counts a batch (one user's jobs with the same request and size,
submitted within minutes) as one unit: its jobs were predicted together and share their
errors, so counting them as independent samples makes the quantile over-confident."""
import json

import numpy as np
import pytest

from hpcpredict.daemon.history.model import WalltimeModel
from hpcpredict.daemon.history.persist import load_model, save_model
from hpcpredict.daemon.history.model import shortening_shift
from hpcpredict.daemon.records import JobRecord
from tests.walltime.test_blend import _rewrite
from tests.walltime.test_predictors import new

REQUEST = 36000.0


def _correlated_runs(seed=8, batches=30, size=10):
    """Runtimes of ``batches`` x ``size`` jobs: each batch shares one draw of its error (the
    input it ran on), its jobs differ only slightly."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0.0, 0.3, batches)
    return [float(3600.0 * np.exp(shared[b] + rng.normal(0.0, 0.01))) for b in range(batches) for _ in range(size)]


def _jobs(runtimes, spacing_s, size=10):
    """The same jobs, submitted ``spacing_s`` apart within each batch of ``size``; batches 10^5 s
    apart. Each job ends before the next is submitted, so every model sees the same history."""
    jobs = []
    for i, runtime in enumerate(runtimes):
        submit = (i // size) * 1e5 + (i % size) * spacing_s
        jobs.append(JobRecord(str(i), "ann", submit, runtime_s=runtime, requested_time_s=REQUEST,
                              start_time=submit, end_time=submit + runtime))
    return jobs


def _trained(jobs, window_s=600.0):
    from hpcpredict.daemon.history.model import ModelParams

    model = WalltimeModel(ModelParams(batch_window_s=window_s))
    for job in jobs:
        model.observe(job)
    return model


def test_a_batch_with_correlated_residuals_is_one_calibration_unit():
    residuals = np.array(_correlated_runs())
    residuals = np.log(residuals / 3600.0)
    gaps = np.full(len(residuals), 2.0)
    batches = np.repeat(np.arange(30), 10)
    independent = shortening_shift(residuals, gaps, 0.9)
    batched = shortening_shift(residuals, gaps, 0.9, batches=batches)
    assert batched > independent
    # 30 units cannot hold the room of two outliers at 97 %; 300 independent jobs can
    assert shortening_shift(residuals, gaps, 0.97, min_outliers=2.0, batches=batches) == np.inf
    assert np.isfinite(shortening_shift(residuals, gaps, 0.97, min_outliers=2.0))


def test_single_job_batches_change_nothing():
    rng = np.random.default_rng(2)
    residuals, gaps = rng.normal(size=500), rng.uniform(0, 3, 500)
    for level in (0.7, 0.9, 0.97):
        assert shortening_shift(residuals, gaps, level, batches=np.arange(500)) == \
            shortening_shift(residuals, gaps, level)


def test_the_model_bounds_batched_jobs_more_conservatively_than_the_same_jobs_spread_out():
    runtimes = _correlated_runs()
    batched = _trained(_jobs(runtimes, spacing_s=30.0))
    spread = _trained(_jobs(runtimes, spacing_s=5000.0))
    # same history, same estimates, same residuals: only the batches differ
    assert list(batched.state.user_residuals["ann"]) == list(spread.state.user_residuals["ann"])
    scored = len(batched.state.user_residuals["ann"])
    assert len(set(batched.state.user_residual_batches["ann"])) == scored // 10 >= 15
    assert len(set(spread.state.user_residual_batches["ann"])) == scored
    probe = new("ann", REQUEST, job_id="")
    for risk in (0.1, 0.2):
        assert spread.predict(probe, risk).bound_s < REQUEST
        assert batched.predict(probe, risk).bound_s > spread.predict(probe, risk).bound_s
    # a window of 0 treats every job as its own batch: the old calibration
    assert _trained(_jobs(runtimes, spacing_s=30.0), window_s=0.0).predict(probe, 0.1).bound_s == \
        spread.predict(probe, 0.1).bound_s


def test_jobs_join_a_batch_whatever_order_they_end_in():
    """Batches are found when jobs end (``observe``), in end order, not submission order. (A job
    that ends before the one linking it to the batch starts a batch of its own: not tested.)"""
    model = WalltimeModel()

    def job(name, submit, request=3600.0, procs=1, user="ann"):
        return JobRecord(name, user, submit, runtime_s=100.0, requested_time_s=request,
                         requested_procs=procs, start_time=submit, end_time=submit + 100.0)

    ids = {name: model._batch_of(job(name, submit)) for name, submit in
           (("a", 0.0), ("c", 500.0), ("b", 200.0), ("d", 1000.0))}   # a-b-c-d each within 600 s
    ids["late"] = model._batch_of(job("late", 1700.0))     # 700 s after the batch's last job
    ids["other request"] = model._batch_of(job("other request", 700.0, request=7200.0))
    ids["other size"] = model._batch_of(job("other size", 700.0, procs=4))
    ids["other user"] = model._batch_of(job("other user", 700.0, user="bob"))
    assert ids["a"] == ids["b"] == ids["c"] == ids["d"]
    assert len({ids["a"], ids["late"], ids["other request"], ids["other size"], ids["other user"]}) == 5


def test_batches_survive_save_and_load_and_format_4_states_load_without_them(tmp_path):
    model = _trained(_jobs(_correlated_runs(), spacing_s=30.0))
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.to_state() == json.loads(json.dumps(model.to_state()))
    probe = new("ann", REQUEST, job_id="")
    assert loaded.predict(probe, 0.1) == model.predict(probe, 0.1)
    state = json.loads((tmp_path / "m" / "state.json").read_text())
    for key in ("residual_batches", "user_residual_batches", "batch_runs", "next_batch"):
        del state[key]
    del state["params"]["batch_window_s"]
    (tmp_path / "m" / "state.json").write_text(json.dumps(state))
    _rewrite(tmp_path / "m", 4, drop_blend=False)
    old = load_model(tmp_path / "m")
    ids = list(old.state.user_residual_batches["ann"])
    assert len(set(ids)) == len(ids) == len(old.state.user_residuals["ann"])   # each its own batch
    assert old.predict(probe, 0.1).bound_s <= model.predict(probe, 0.1).bound_s
    # new jobs after loading get fresh ids, never one of the stored ones
    old.observe(JobRecord("n", "ann", 9e6, runtime_s=3600.0, requested_time_s=REQUEST, start_time=9e6,
                          end_time=9e6 + 3600.0))
    assert old.state.user_residual_batches["ann"][-1] not in ids
