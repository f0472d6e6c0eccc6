"""The compiled GBRT (flat arrays, used per request) answers exactly what sklearn answers."""
import doctest

import numpy as np
import pytest

from hpcpredict.daemon.comm import compiled as compiled_module
from hpcpredict.daemon.comm.compiled import CompiledGBRT
from hpcpredict.daemon.comm.models import ClassModel
from hpcpredict.daemon.lab.comm.training import fit_class_model, save_class_model
from hpcpredict.daemon.errors import ModelArtifactError

NAMES = ("n", "ppn", "l", "PD", "PM", "hops")


def _data(rows: int, seed: int):
    """Features spanning orders of magnitude (like message sizes and rank counts), log-ish target."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(1, 4096, rows), rng.integers(1, 64, rows), 2.0 ** rng.integers(0, 24, rows),
                         rng.random(rows) * 10, rng.integers(1, 26, rows), rng.random(rows)]).astype(float)
    y = 1e-6 * X[:, 2] ** 0.8 * np.log2(X[:, 0] + 1) * (1 + X[:, 5]) + 1e-5 * rng.random(rows) + 1e-6
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = _data(1500, 0)
    params = {"n_estimators": 120, "learning_rate": 0.1, "max_depth": 6, "min_samples_leaf": 2}
    return fit_class_model(ClassModel("B", list(NAMES[:5]) + ["hops"], params), X, NAMES, y, seed=0)


def _probe_rows(model, count: int, seed: int) -> np.ndarray:
    """New rows, plus rows sitting exactly on split thresholds (where float32 rounding decides)."""
    X, _ = _data(count, seed)
    forest = model.compiled_.forest
    split = np.flatnonzero(np.isfinite(forest.threshold))
    picks = np.random.default_rng(seed).choice(split, size=min(count, split.size), replace=False)
    on_threshold = X[:picks.size].copy()
    on_threshold[np.arange(picks.size), forest.feature[picks]] = forest.threshold[picks]
    return np.vstack([X, on_threshold])


def test_many_rows_equal_sklearn(fitted):
    X = _probe_rows(fitted, 4000, 1)
    expected = fitted.estimator_.predict(X)
    np.testing.assert_allclose(fitted.compiled_.predict(X), expected, rtol=1e-9, atol=0)
    singles = np.array([fitted.compiled_.predict_row(x) for x in X[::7]])
    np.testing.assert_allclose(singles, expected[::7], rtol=1e-9, atol=0)


def test_predict_row_in_seconds_matches_sklearn(fitted):
    X = _probe_rows(fitted, 300, 2)
    for x in X[::5]:
        row = dict(zip(NAMES, x))
        want = float(np.exp2(fitted.estimator_.predict(x[None, :])[0]))
        assert fitted.predict_row(row) == pytest.approx(want, rel=1e-9, abs=0)


def test_skops_round_trip_compiles_on_load(fitted, tmp_path):
    path = tmp_path / "classB.skops"
    save_class_model(fitted, path)
    loaded = ClassModel("B", fitted.features).load_estimator(path)
    X = _probe_rows(fitted, 500, 3)
    np.testing.assert_allclose(loaded.compiled_.predict(X), fitted.estimator_.predict(X), rtol=1e-9, atol=0)


def test_npz_round_trip_without_pickle(fitted, tmp_path):
    path = tmp_path / "classB.npz"
    np.savez(path, **fitted.compiled_.arrays())
    with np.load(path, allow_pickle=False) as data:
        again = CompiledGBRT.from_arrays(data)
    X = _probe_rows(fitted, 500, 4)
    np.testing.assert_allclose(again.predict(X), fitted.estimator_.predict(X), rtol=1e-9, atol=0)


def test_bad_arrays_and_inputs_are_refused(fitted):
    data = fitted.compiled_.arrays()
    with pytest.raises(ModelArtifactError, match="gbrt"):
        CompiledGBRT.from_arrays({k: v for k, v in data.items() if k != "gbrt"})
    narrow = dict(data, gbrt=np.array([0.0, 0.1, 1.0]))   # trees split on features the header lacks
    with pytest.raises(ModelArtifactError, match="inconsistent"):
        CompiledGBRT.from_arrays(narrow)
    with pytest.raises(ValueError, match="expects 6 features"):
        fitted.compiled_.predict_row(np.zeros(5))
    with pytest.raises(ModelArtifactError):
        CompiledGBRT.from_sklearn(object())


def test_docstring_example():
    result = doctest.testmod(compiled_module)
    assert result.attempted > 0 and result.failed == 0
