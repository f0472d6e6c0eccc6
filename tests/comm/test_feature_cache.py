"""Class B features are cached per request: same answer, built once; class C is never cached."""
import numpy as np
import pytest

from hpcpredict.daemon.comm import served
from hpcpredict.daemon.comm.models import ClassModel
from hpcpredict.daemon.comm.served import CommModelSet, CommRequest
from hpcpredict.daemon.errors import InvalidRequest
from hpcpredict.daemon.lab.comm.training import fit_class_model


@pytest.fixture(scope="module")
def model_set():
    """Tiny real models on the real feature names (fitted on features of real requests)."""
    requests = [CommRequest(pattern=p, message_bytes=b, ntasks=t, nodes=n, ntasks_per_node=0, peers=2)
                for p in ("halo3d", "lulesh1", "benchmark") for b in (64, 4096, 262144)
                for t, n in ((8, 2), (27, 3), (64, 4))]
    probe = CommModelSet({"placement": {}}, {})
    rows = [probe.features(r) for r in requests]
    names = tuple(sorted(rows[0]))
    X = np.array([[row[f] for f in names] for row in rows])
    y = 1e-6 * (1.0 + np.abs(X).sum(axis=1))
    models = {c: fit_class_model(ClassModel(c, list(names), {"n_estimators": 20, "max_depth": 3}), X, names, y) for c in "AB"}
    return CommModelSet({"placement": {}}, models)


def test_repeated_request_is_built_once_and_answers_the_same(model_set, monkeypatch):
    calls = []
    real = served.build_pattern
    monkeypatch.setattr(served, "build_pattern", lambda *a, **k: calls.append(a) or real(*a, **k))
    fresh = CommModelSet(model_set.manifest, model_set.models)
    request = CommRequest(pattern="halo3d", message_bytes=4096, ntasks=27, nodes=3, ntasks_per_node=0)
    first = fresh.predict(request)
    second = fresh.predict(CommRequest(pattern="halo3d", message_bytes=4096, ntasks=27, nodes=3, ntasks_per_node=0))
    assert first == second and len(calls) == 1
    other = fresh.predict(CommRequest(pattern="halo3d", message_bytes=8192, ntasks=27, nodes=3, ntasks_per_node=0))
    assert len(calls) == 2 and other.seconds > 0
    assert first.seconds == pytest.approx(fresh.models["B"].predict_row(fresh.features(request)), rel=1e-12)


def test_unhashable_request_is_answered_uncached(model_set):
    request = CommRequest(pattern="halo3d", message_bytes=4096, ntasks=27, nodes=3, ntasks_per_node=0, grid=[3, 3, 3])
    assert model_set.predict(request).seconds > 0


def test_bad_request_is_refused_every_time(model_set):
    bad = CommRequest(pattern="halo3d", message_bytes=4096, ntasks=0, nodes=3, ntasks_per_node=0)
    for _ in range(2):
        with pytest.raises(InvalidRequest, match="ntasks"):
            model_set.predict(bad)
