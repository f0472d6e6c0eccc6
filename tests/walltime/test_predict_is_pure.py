"""Predicting never changes a walltime model, so predictions need no lock.

The daemon answers submissions from many threads while ended jobs are observed; a prediction
that wrote to the model (remembered answers, calibration caches) would need a lock around it,
and would make later answers depend on which jobs were only asked about.
"""
import hashlib
import json
import threading

import numpy as np
import pytest

from hpcpredict.daemon.history.model import WalltimeModel
from hpcpredict.daemon.history.predictors import BASELINES
from hpcpredict.daemon.lab.history.training import train_model
from hpcpredict.daemon.records import JobRecord
from tests.walltime.test_predictors import synthetic_users


def digest(model) -> str:
    """Everything an WalltimeModel holds: learned state, remembered answers, published calibration."""
    h = hashlib.sha256(json.dumps(model.to_state(), sort_keys=True).encode())
    h.update(repr(sorted((k, v[2], v[3]) for k, v in model.state.pending.items())).encode())
    for key, value in sorted(model._cluster_calibration.items()):
        h.update(repr((key, np.asarray(value).tolist())).encode())
    for key, value in sorted(model._user_calibration.items()):
        h.update(repr((key, value.tolist())).encode())
    for published in (model._cluster_shortening, model._user_shortening):
        for key, value in sorted(published.items()):
            h.update(repr((key, value.candidates.tolist(), value.selected.tolist(), value.outliving.tolist())).encode())
    return h.hexdigest()


def probes(n=60):
    """Warm users, a user without history, a request far from the user's, no request; with job ids."""
    users = [f"u{i}" for i in range(40)] + ["nobody"]
    return [JobRecord(f"probe{i}", users[i % len(users)], 2e9 + i, requested_time_s=[5000.0, 80000.0, 0.0][i % 3],
                      requested_procs=1 + i % 4) for i in range(n)]


@pytest.fixture(scope="module")
def trained():
    return train_model(synthetic_users(seed=21, n_jobs=1500))


def test_predict_with_and_without_explanation_leaves_the_model_unchanged(trained):
    before = digest(trained)
    for job in probes():
        for risk in (0.03, 0.2):
            trained.predict(job, risk)
            trained.predict(job, risk, explain=False)
    assert digest(trained) == before


def test_submit_only_remembers_the_answer(trained):
    model = WalltimeModel.from_state(trained.to_state())
    state_before = json.dumps(model.to_state(), sort_keys=True)
    job = probes()[0]
    assert model.submit(job) == model.predict(job)
    assert job.job_id in model.state.pending
    assert json.dumps(model.to_state(), sort_keys=True) == state_before


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baselines_predict_leaves_them_unchanged(name):
    predictor = BASELINES[name]()
    for job in synthetic_users(seed=22, n_jobs=200):
        predictor.observe(job)
    before = repr(vars(predictor))
    for job in probes():
        predictor.predict(job)
    assert repr(vars(predictor)) == before


def test_concurrent_predictions_equal_sequential_ones(trained):
    jobs = probes()
    expected = [trained.predict(job) for job in jobs]
    results: dict[int, list] = {}

    def work(worker):
        results[worker] = [trained.predict(job) for job in jobs for _ in range(5)][::5]

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(results[w] == expected for w in range(6))


def test_predictions_while_jobs_end_never_fail_and_stay_coherent():
    """One thread observes ended jobs (as the daemon's epilog path does) while others predict
    without any lock: no torn read may raise or produce an incoherent answer."""
    jobs = synthetic_users(seed=23, n_jobs=3000)
    model = train_model(jobs[:1000])
    errors, answers = [], []
    stop = threading.Event()

    def predict_loop():
        try:
            while not stop.is_set():
                for job in probes(30):
                    answers.append(model.predict(job))
        except Exception as error:   # recorded: the assertion below names it
            errors.append(error)

    threads = [threading.Thread(target=predict_loop) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        for job in jobs[1000:]:
            model.observe(job)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert errors == []
    assert answers and all(1.0 <= a.runtime_s <= a.bound_s and np.isfinite(a.bound_s) for a in answers)
