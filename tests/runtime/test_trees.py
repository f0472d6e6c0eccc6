import numpy as np
import pytest

from hpcpredict.daemon.runtime.compiled import CompiledForest
from hpcpredict.daemon.lab.runtime.evaluation import split_by_configuration
from hpcpredict.daemon.lab.runtime.accuracy import coverage
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.trees import ExtraTreesRuntime

from .synthetic import power_law_table


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(3)
    X = rng.uniform(1, 10, size=(150, 4))
    y = X[:, 0] ** 2 * X[:, 1] * np.exp(rng.normal(0, 0.05, 150))
    X = np.vstack([X, X[:20]])  # repeated configurations: multi-sample leaves with variance
    y = np.concatenate([y, y[:20] * 1.05])
    return X, y, ExtraTreesRuntime(n_estimators=40, calibration_folds=0, random_state=0).fit(X, y)


def test_compiled_forest_equals_sklearn(fitted):
    X, _, model = fitted
    Z = model.feature_terms(X)
    means, variances = model.compiled_.tree_predictions(Z)
    for k, tree in enumerate(model.forest_.estimators_):
        np.testing.assert_allclose(means[:, k], tree.predict(Z), rtol=0, atol=1e-12)
        leaves = tree.apply(Z)
        expected = np.where(tree.tree_.n_node_samples[leaves] > 1, tree.tree_.impurity[leaves], 0.01)
        np.testing.assert_allclose(variances[:, k], expected)
    np.testing.assert_allclose(model.compiled_.mean_std(Z)[0], model.forest_.predict(Z), atol=1e-12)
    # single row (the daemon's case) gives the same answer as the batch
    m_one, s_one = model.compiled_.mean_std(Z[7])
    m_all, s_all = model.compiled_.mean_std(Z)
    assert m_one[0] == pytest.approx(m_all[7]) and s_one[0] == pytest.approx(s_all[7])


def test_seed_interval_formula(fitted):
    X, _, model = fitted
    Z = model.feature_terms(X[:5])
    m_i = np.stack([tree.predict(Z) for tree in model.forest_.estimators_], axis=1)
    s2_i = model.compiled_.tree_predictions(Z)[1]
    m = m_i.mean(axis=1)
    s = np.sqrt(np.mean(m_i**2 + s2_i, axis=1) - m**2)
    got_m, got_s = model.predict_log_dist(X[:5])
    np.testing.assert_allclose(got_m, m + model.trend_of(X[:5]), atol=1e-12)  # trees model the trend's residual
    np.testing.assert_allclose(got_s, s, atol=1e-9)


def test_compiled_arrays_round_trip(fitted):
    X, _, model = fitted
    again = CompiledForest.from_arrays(model.compiled_.arrays())
    Z = model.feature_terms(X)
    np.testing.assert_array_equal(again.mean_std(Z)[0], model.compiled_.mean_std(Z)[0])


def test_importance_reduction_keeps_the_relevant_inputs():
    table = power_law_table(n_configs=100, reps=1, seed=1)
    model = RuntimeModel("extra-trees", {"n_estimators": 60, "calibration_folds": 0, "random_state": 0}).fit(table)
    assert set(model.kept_features) <= {"n", "m", "p"} and {"n", "m"} <= set(model.kept_features)
    assert "noise_a" not in model.required_inputs and "noise_b" not in model.required_inputs
    everything = RuntimeModel("extra-trees", {"n_estimators": 20, "importance_threshold": None,
                                              "calibration_folds": 0}).fit(table)
    assert everything.kept_features == ["n", "m", "p", "noise_a", "noise_b"]


def test_polynomial_expansion_names_terms():
    table = power_law_table(n_configs=40, reps=1, seed=2)
    model = RuntimeModel("extra-trees", {"n_estimators": 10, "degree": 2, "importance_threshold": None,
                                         "calibration_folds": 0}, inputs=["n", "m"]).fit(table)
    assert model.kept_features == ["n", "m", "n^2", "n m", "m^2"]


def test_calibrated_coverage_near_nominal():
    table = power_law_table(n_configs=240, reps=2, seed=4)
    train, test = split_by_configuration(table.groups, 0.5, seed=0)
    model = RuntimeModel("extra-trees", {"n_estimators": 60, "random_state": 0}).fit(table, train)
    rows = [table.rows[i] for i in test]
    for nominal in (0.8, 0.95):
        low, high = model.predict_interval(rows, nominal)
        assert abs(coverage(table.y[test], low, high) - nominal) < 0.08
    assert len(model.estimator_.calibration_scores_) == train.size


def test_rejects_bad_targets():
    with pytest.raises(ValueError):
        ExtraTreesRuntime().fit(np.ones((3, 1)), np.array([1.0, -1.0, 2.0]))
