import numpy as np
import pytest

from hpcpredict.daemon.lab.runtime.ann import ANNEnsemble
from hpcpredict.daemon.lab.runtime.evaluation import evaluate, split_by_configuration
from hpcpredict.daemon.lab.runtime.accuracy import coverage, mape, rank_accuracy, relative_width
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.reduction import keep_by_importance, reduce_by_time
from hpcpredict.daemon.lab.runtime.selection import select_learner
from hpcpredict.daemon.lab.runtime.transfer import TransferRuntime
from hpcpredict.daemon.lab.runtime.trees import ExtraTreesRuntime

from .synthetic import power_law_table


@pytest.fixture(scope="module")
def table():
    return power_law_table(n_configs=120, reps=2, seed=5)


def test_split_keeps_repetitions_together(table):
    train, test = split_by_configuration(table.groups, 0.25, seed=3)
    assert set(table.groups[train]).isdisjoint(table.groups[test])
    assert len(set(table.groups[train])) == 30 and train.size + test.size == len(table.y)


@pytest.mark.parametrize("method", ["kfold", "bagging"])
def test_ann_ensemble_learns_known_function(table, method):
    train, test = split_by_configuration(table.groups, 0.5, seed=0)
    model = RuntimeModel("ann", {"n_members": 5, "method": method, "max_epochs": 300, "random_state": 0},
                         inputs=["n", "m", "p"]).fit(table, train)
    predicted = model.predict([table.rows[i] for i in test])
    assert mape(table.y[test], predicted) < 0.25
    assert rank_accuracy(table.y[test], predicted) > 0.85
    assert len(model.estimator_.members_) == 5
    assert np.all(model.estimator_.coefficient_of_variation(model.matrix(table.rows[:5])) >= 0)


def test_ann_weighted_target_variant_runs():
    rng = np.random.default_rng(1)
    X = rng.uniform(1, 10, size=(60, 1))
    model = ANNEnsemble(n_members=3, target="weighted", max_epochs=100, random_state=0).fit(X, 2 * X[:, 0])
    assert model.predict(X).shape == (60,)


def test_extra_trees_beat_plain_trees_and_linear_on_power_law(table):
    trees = evaluate(table, learner="extra-trees", train_fraction=0.5, seed=1, params={"n_estimators": 60})
    plain = evaluate(table, learner="extra-trees", train_fraction=0.5, seed=1,
                     params={"n_estimators": 60, "trend": "none"})
    linear = evaluate(table, learner="linear", train_fraction=0.5, seed=1)
    assert trees["mape"] < 0.1 and trees["rank_accuracy"] > 0.95
    assert trees["mape"] < plain["mape"] < linear["mape"]  # the log-log trend helps on power laws
    assert set(trees) >= {"mape", "rank_accuracy", "coverage80", "coverage95", "interval_width80",
                          "n_train", "n_test", "features_kept"}


def test_transfer_beats_target_alone_with_few_samples():
    source = power_law_table(n_configs=150, reps=1, seed=7)
    target = power_law_table(n_configs=150, reps=1, seed=7, scale=2.5, exponent=1.1)
    names = ["n", "m", "p"]
    src = RuntimeModel("extra-trees", {"n_estimators": 60, "calibration_folds": 0, "random_state": 0},
                       inputs=names).fit(source)
    X_target = src.matrix(target.rows)
    rng = np.random.default_rng(0)
    few = rng.choice(len(target.y), 8, replace=False)
    rest = np.setdiff1d(np.arange(len(target.y)), few)
    transfer = TransferRuntime(src.estimator_, random_state=0).fit(X_target[few], target.y[few])
    # the seed's comparison: the same learner (plain extra-trees) on the few target runs alone
    alone = ExtraTreesRuntime(n_estimators=60, calibration_folds=0, trend="none",
                              random_state=0).fit(X_target[few], target.y[few])
    error_transfer = mape(target.y[rest], transfer.predict(X_target[rest]))
    error_alone = mape(target.y[rest], alone.predict(X_target[rest]))
    assert error_transfer < 0.2 and error_transfer < error_alone / 2
    low, high = transfer.predict_interval(X_target[rest], 0.8)
    assert np.all(low <= high)


def test_model_selection_prefers_linear_on_linear_data():
    from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
    rows = "\n".join(f"{a},{b},{3 * a + 2 * b + 10}" for a in range(1, 12) for b in range(1, 12))
    table = parse_runs_csv("a,b,t\n" + rows, target="t")
    best, scores = select_learner(table, np.arange(len(table.y)), candidates={
        "linear": {"calibration_folds": 0}, "extra-trees": {"n_estimators": 20, "calibration_folds": 0}})
    assert best == "linear" and scores["linear"] < 1e-6 < scores["extra-trees"]


def test_metrics_known_values():
    y = np.array([1.0, 2.0, 4.0])
    assert mape(y, np.array([1.0, 2.2, 3.6])) == pytest.approx((0 + 0.1 + 0.1) / 3)
    assert rank_accuracy(y, np.array([3.0, 2.0, 1.0])) == 0.0
    assert coverage(y, y - 0.5, y + 0.5) == 1.0 and coverage(y, y + 1, y + 2) == 0.0
    assert relative_width(y, y * 0.5, y * 1.5) == pytest.approx(1.0)


def test_time_reduction_uses_share_of_runtime():
    times = {"early": np.array([0.1, 0.4, 0.2]), "late": np.array([5.0, 9.0, 10.0]),
             "never": np.array([np.nan, np.nan, 0.01])}
    assert reduce_by_time(times, runtime_s=np.array([10.0, 10.0, 10.0])) == ["early"]
    assert reduce_by_time(times, runtime_s=np.array([10.0, 10.0, 10.0]), max_share=0.95) == ["early", "late"]
    assert keep_by_importance(np.array([0.0, 0.0])) == [0, 1]
    assert keep_by_importance(np.array([0.5, 0.3, 0.15, 0.05])) == [0, 1, 2]
