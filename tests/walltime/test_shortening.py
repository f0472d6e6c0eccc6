"""The runtime bound is calibrated on the jobs it shortens (bound below the request), not on all
jobs: those are the jobs a lowered limit can kill, and the ones with the widest residuals."""
import json
import math

import numpy as np
import pytest

from hpcpredict.daemon.history.model import WalltimeModel
from hpcpredict.daemon.history.persist import load_model, save_model
from hpcpredict.daemon.lab.history.training import train_model
from hpcpredict.daemon.history.model import NO_REQUEST_GAP, conformal_quantile, shortening_shift
from hpcpredict.daemon.records import JobRecord
from tests.walltime.test_blend import _rewrite
from tests.walltime.test_predictors import new


def _selected_outlive_rate(residuals, gaps, q):
    selected = gaps > q
    return float(np.mean(residuals[selected] > q)), int(selected.sum())


def test_shift_covers_the_jobs_it_shortens_where_the_marginal_quantile_does_not():
    """Residuals widen with the gap (request far above the estimate), as on real traces."""
    rng = np.random.default_rng(3)
    gaps = rng.uniform(0.05, 4.0, 5000)
    residuals = np.minimum(rng.normal(0.0, 0.15 + 0.4 * gaps), gaps)   # a job never outlives its request
    level = 0.95
    marginal = conformal_quantile(np.sort(residuals), level)
    rate_marginal, _ = _selected_outlive_rate(residuals, gaps, marginal)
    q = shortening_shift(residuals, gaps, level)
    rate, shortened = _selected_outlive_rate(residuals, gaps, q)
    assert rate_marginal > 0.08                   # the flaw: the marginal bound misses its target
    assert rate <= 1 - level and shortened >= 100  # the fix: within the target, still shortening
    assert q > marginal


def test_shift_without_requests_is_the_plain_conformal_quantile():
    residuals = np.random.default_rng(4).normal(size=400)
    gaps = np.full(400, NO_REQUEST_GAP)
    assert shortening_shift(residuals, gaps, 0.9) == conformal_quantile(np.sort(residuals), 0.9)


def test_too_few_shortened_jobs_give_no_shift():
    residuals = np.zeros(50)
    assert shortening_shift(residuals, np.full(50, 5.0), 0.97) == 0.0
    # two outliers' room asks for 2 / 0.03 - 1 = 66 jobs
    assert shortening_shift(residuals, np.full(50, 5.0), 0.97, min_outliers=2.0) == math.inf


def _stream(seed=5, n_users=30, n_jobs=6000):
    """Users whose requests are 1.2-30x their typical runtime; the further the request, the
    wider the runtimes (a user asking for much more than usual is unsure)."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(np.log(600), np.log(20000), n_users)
    jobs, t = [], 0.0
    for i in range(n_jobs):
        u = int(rng.integers(n_users))
        gap = float(rng.uniform(np.log(1.2), np.log(30)))
        request = float(np.exp(centre[u] + gap))
        runtime = float(np.exp(rng.normal(centre[u], 0.1 + 0.35 * gap)))
        t += float(rng.exponential(300))
        jobs.append(JobRecord(str(i), f"u{u}", t, runtime_s=min(runtime, request), requested_time_s=request,
                              state="TIMEOUT" if runtime >= request else "COMPLETED", start_time=t,
                              end_time=t + min(runtime, request)))
    return jobs


@pytest.mark.parametrize("risk", [0.05, 0.1])
def test_online_outlive_rate_among_shortened_jobs_is_the_risk(risk):
    """Online, as the daemon runs: predict at submission, learn when the job ended."""
    import heapq

    jobs = _stream()
    model = WalltimeModel()
    running, shortened, outlived = [], 0, 0
    for index, job in enumerate(jobs):
        while running and running[0][0] <= job.submit_time:
            model.observe(jobs[heapq.heappop(running)[1]])
        answer = model.submit(job, risk, explain=False)
        if answer.bound_s < job.requested_time_s and not answer.fallback:
            shortened += 1
            outlived += job.runtime_s > answer.bound_s and job.state == "COMPLETED"
        heapq.heappush(running, (job.end_time, index))
    assert shortened >= 300
    assert outlived / shortened <= 1.3 * risk


def test_adaptive_level_moves_only_on_shortened_jobs():
    jobs = _stream(n_jobs=1500)
    model = train_model(jobs)
    user = "u1"
    answers = {}
    for request in sorted({j.requested_time_s for j in jobs if j.user == user}):
        job = new(user, request, job_id=f"r{request}")
        answer = model.submit(job, 0.05, explain=False)
        assert not answer.fallback
        answers["shortened" if answer.bound_s < request else "kept"] = (job, answer)
    assert set(answers) == {"shortened", "kept"}
    offset = model.state.risk_offset
    job, answer = answers["kept"]
    model.observe(JobRecord(job.job_id, user, 1e9, runtime_s=job.requested_time_s * 0.9,
                            requested_time_s=job.requested_time_s, start_time=1e9, end_time=1e9 + 1))
    assert model.state.risk_offset == offset          # a bound at the request can kill nothing
    job, answer = answers["shortened"]
    runtime = min(answer.bound_s * 1.5, job.requested_time_s * 0.99)
    model.observe(JobRecord(job.job_id, user, 1e9, runtime_s=runtime, requested_time_s=job.requested_time_s,
                            start_time=1e9, end_time=1e9 + runtime))
    assert model.state.risk_offset == pytest.approx(offset + model.params.adapt_rate * (0.05 - 1.0))


def test_gaps_survive_save_and_load_and_older_states_load_without_them(tmp_path):
    model = train_model(_stream(n_jobs=1500))
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert loaded.to_state() == json.loads(json.dumps(model.to_state()))
    probes = [new(f"u{i}", 5e4, job_id="") for i in range(10)]
    assert [loaded.predict(p) for p in probes] == [model.predict(p) for p in probes]
    _rewrite(tmp_path / "m", 3, drop_blend=False)
    state = json.loads((tmp_path / "m" / "state.json").read_text())
    del state["residual_gaps"], state["user_residual_gaps"], state["params"]["min_shortened_outliers"]
    (tmp_path / "m" / "state.json").write_text(json.dumps(state))
    _rewrite(tmp_path / "m", 3, drop_blend=False)
    old = load_model(tmp_path / "m")
    assert all(set(gaps) == {NO_REQUEST_GAP} for gaps in old.state.residual_gaps.values())
    assert all(1.0 <= old.predict(p).bound_s <= 5e4 * (1 + 1e-9) for p in probes)
