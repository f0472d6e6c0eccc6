"""Baselines against hand-computed answers; our model's behaviour, calibration and persistence."""
import json
import math

import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.history.model import WalltimeModel
from hpcpredict.daemon.history.persist import load_model, save_model
from hpcpredict.daemon.history.predictors import (BASELINES, AleaMax5Predictor, CesnetPredictor, EcmwfPredictor,
                                                  Last2Predictor, UserRequestPredictor)
from hpcpredict.daemon.lab.history.evaluation import replay, score
from hpcpredict.daemon.lab.history.training import train_model
from hpcpredict.daemon.records import JobRecord


def ended(i, user, runtime, request, *, name="", procs=1, nodes=1, state="COMPLETED", t=None):
    submit = 1000.0 * i if t is None else t
    return JobRecord(str(i), user, submit, runtime_s=runtime, requested_time_s=request, application=name,
                     job_name=name, requested_procs=procs, nodes=nodes, state=state,
                     start_time=submit, end_time=submit + runtime)


def new(user, request, *, name="", procs=1, nodes=1, job_id="new"):
    return JobRecord(job_id, user, 1e9, requested_time_s=request, application=name, job_name=name,
                     requested_procs=procs, nodes=nodes)


def test_baseline_names_match_the_cli_keys():
    assert list(BASELINES) == ["user", "last2", "alea-max5", "cesnet", "ecmwf"]


def test_baselines_hand_computed():
    history = [ended(1, "ann", 600, 3600), ended(2, "ann", 1800, 2000), ended(3, "ann", 900, 3600)]
    predictors = [UserRequestPredictor(), Last2Predictor(), AleaMax5Predictor(), CesnetPredictor()]
    for predictor in predictors:
        for record in history:
            predictor.observe(record)
    job = new("ann", 4000)
    user, last2, alea, cesnet = (p.predict(job) for p in predictors)
    assert user.runtime_s == 4000 and not user.fallback
    assert last2.runtime_s == pytest.approx((1800 + 900) / 2)
    assert alea.runtime_s == pytest.approx(4000 * 0.9)           # max ratio 1800/2000
    assert cesnet.runtime_s == pytest.approx(4000)               # 3600 + 900 capped at the request
    assert all(p.bound_s == p.runtime_s for p in (user, last2, alea, cesnet))


def test_ecmwf_same_name_and_geometry_only():
    ecmwf = EcmwfPredictor()
    for i, runtime in enumerate((100.0, 200.0, 300.0)):
        ecmwf.observe(ended(i, "ann", runtime, 3600, name="lmp", procs=4, nodes=1))
    ecmwf.observe(ended(9, "ann", 3000.0, 3600, name="lmp", procs=8, nodes=2))
    answer = ecmwf.predict(new("ann", 3600, name="lmp", procs=4, nodes=1))
    assert answer.runtime_s == pytest.approx(200 + math.sqrt(20000 / 3))
    assert ecmwf.predict(new("ann", 3600, name="other")).fallback


@pytest.mark.parametrize("cls", list(BASELINES.values()) + [WalltimeModel])
def test_cold_start_is_flagged_and_within_request(cls):
    answer = cls().predict(new("nobody", 7200))
    assert 1.0 <= answer.runtime_s <= 7200 and answer.bound_s <= 7200
    if cls is not UserRequestPredictor:
        assert answer.fallback


def test_model_learns_a_repeated_job_and_explains_it():
    model = WalltimeModel()
    for i in range(6):
        model.observe(ended(i, "ann", 2700.0 + 60 * i, 14400, name="lmp", procs=64))
    answer = model.predict(new("ann", 14400, name="lmp", procs=64))
    assert not answer.fallback and answer.model_name == "hpcpredict"
    assert 2700 <= answer.runtime_s <= 3000
    assert answer.runtime_s <= answer.bound_s <= 14400
    assert answer.explanation[0] == "your last 5 runs of lmp: 46–50 min"


def test_bound_never_exceeds_request_and_risk_is_validated():
    model = train_model([ended(i, f"u{i % 3}", 100.0 * (1 + i % 7), 3600) for i in range(300)])
    answer = model.predict(new("u1", 1200))
    assert answer.bound_s <= 1200 and answer.low_s <= answer.runtime_s <= answer.high_s
    with pytest.raises(ValueError):
        model.predict(new("u1", 1200), risk=0.0)


def test_censored_jobs_are_not_calibration_residuals():
    model = WalltimeModel()
    for i in range(5):
        model.observe(ended(i, "ann", 1000.0, 3600))
    before = len(model.state.residuals.get("warm", ()))
    model.submit(new("ann", 600, job_id="t"))
    model.observe(JobRecord("t", "ann", 5e8, runtime_s=600.0, requested_time_s=600.0, state="TIMEOUT",
                            end_time=5e8 + 600))
    assert len(model.state.residuals.get("warm", ())) == before
    model.submit(new("ann", 3600, job_id="c"))
    model.observe(JobRecord("c", "ann", 5e8, runtime_s=900.0, requested_time_s=3600.0, end_time=5e8 + 900))
    assert len(model.state.residuals["warm"]) == before + 1


def synthetic_users(seed, n_jobs=4000, n_users=40):
    """Users with their own log-normal runtime (random spread), requests 2-8x above typical."""
    rng = np.random.default_rng(seed)
    centre = rng.uniform(np.log(300), np.log(20000), n_users)
    spread = rng.uniform(0.1, 0.8, n_users)
    jobs, t = [], 0.0
    for i in range(n_jobs):
        u = int(rng.integers(n_users))
        runtime = float(np.exp(rng.normal(centre[u], spread[u])))
        request = float(np.exp(centre[u]) * rng.uniform(2, 8))
        t += float(rng.exponential(600))
        state = "TIMEOUT" if runtime >= request else "COMPLETED"
        jobs.append(JobRecord(str(i), f"u{u}", t, runtime_s=min(runtime, request), requested_time_s=request,
                              state=state, start_time=t, end_time=t + min(runtime, request)))
    return jobs


@pytest.mark.parametrize("risk", [0.03, 0.10])
def test_bound_kill_rate_is_calibrated_on_known_distributions(risk):
    result = replay(synthetic_users(seed=1), {"hpcpredict": WalltimeModel()}, risk=risk)
    scores = score(result)
    kill = scores["hpcpredict-bound"].kill_rate
    assert kill <= 1.5 * risk + 0.005      # controlled
    assert kill >= 0.3 * risk              # and not trivially the request
    assert scores["hpcpredict-bound"].accuracy > scores["hpcpredict"].accuracy * 0.5
    # the point estimate beats the request on data where the request is 2-8x too long
    request_accuracy = float(np.mean(result.runtime_s / np.array([j.requested_time_s for j in
                                                                  sorted(synthetic_users(seed=1), key=lambda j: j.submit_time)])))
    assert scores["hpcpredict"].accuracy > request_accuracy + 0.2


def test_save_load_round_trip(tmp_path):
    jobs = synthetic_users(seed=2, n_jobs=1500)
    model = train_model(jobs)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    for user in ("u1", "u7", "u30", "stranger"):
        job = new(user, 5000.0, job_id="")
        assert loaded.predict(job) == model.predict(job)
    # both keep learning identically
    follow_up = ended(10**6, "u1", 1234.0, 5000.0, t=1e9)
    model.observe(follow_up)
    loaded.observe(follow_up)
    assert loaded.predict(new("u1", 5000.0, job_id="")) == model.predict(new("u1", 5000.0, job_id=""))
    assert b"pickle" not in (tmp_path / "m" / "state.json").read_bytes()[:100]


@pytest.mark.parametrize("damage", ["missing", "checksum", "kind", "json", "field"])
def test_bad_artifacts_raise_model_artifact_error(tmp_path, damage):
    directory = tmp_path / "m"
    save_model(train_model(synthetic_users(seed=3, n_jobs=200)), directory)
    state, manifest = directory / "state.json", directory / "manifest.json"
    if damage == "missing":
        state.unlink()
    elif damage == "checksum":
        state.write_bytes(state.read_bytes().replace(b'"observed":', b'"observed": '))
    elif damage == "kind":
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "kind": "comm"}))
    elif damage in ("json", "field"):
        payload = b"{not json" if damage == "json" else json.dumps({"params": {}}).encode()
        state.write_bytes(payload)
        import hashlib
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()),
                                        "sha256": hashlib.sha256(payload).hexdigest()}))
    with pytest.raises(ModelArtifactError):
        load_model(directory)


def test_replaying_the_training_history_again_changes_nothing(tmp_path):
    jobs = synthetic_users(seed=4, n_jobs=600)
    model = train_model(jobs)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    for record in sorted(jobs, key=lambda j: j.end_time):   # what the daemon does at start
        loaded.observe(record)
    probe = new("u3", 5000.0, job_id="")
    assert loaded.predict(probe) == model.predict(probe)
    later = ended(10**6, "u3", 777.0, 5000.0, t=max(j.end_time for j in jobs) + 10)
    loaded.observe(later)                                    # a new outcome is learned
    assert loaded.state.history.recent("u3")[-1].log_runtime == pytest.approx(math.log(777.0))


def test_selector_learns_the_right_expert_from_ended_jobs_only():
    """Every run takes 40 % of a fresh request: only the three runtime/request-ratio experts are right,
    and the selector must learn that; answering alone must never train it."""
    from hpcpredict.daemon.history.model import EXPERTS

    rng = np.random.default_rng(0)
    model = WalltimeModel()
    for i in range(800):
        request = float(np.exp(rng.uniform(np.log(2000), np.log(6000))))
        job = ended(i, f"u{i % 10}", 0.4 * request, request, procs=1 + i)
        before = model.state.selector.copy()
        model.predict(job)
        assert np.array_equal(model.state.selector, before)
        model.observe(job)
    probe = new("u3", 5000.0, procs=7)
    experts, features = model._experts(probe)
    assert EXPERTS[model._choose(features)] in ("ratio_last", "ratio_medoid", "max_ratio5")
    assert model.predict(probe).runtime_s == pytest.approx(2000.0, rel=0.01)


def test_selector_of_the_wrong_shape_is_refused():
    state = train_model(synthetic_users(seed=5, n_jobs=100)).to_state()
    state["selector"] = state["selector"][:-1]
    with pytest.raises(ValueError):
        WalltimeModel.from_state(state)
