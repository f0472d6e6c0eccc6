"""Boosted trees and the log-linear model served from plain arrays; the learner choice; evaluate as served."""
import io
import json

import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
from hpcpredict.daemon.lab.runtime.evaluation import evaluate, split_by_configuration
from hpcpredict.daemon.lab.runtime.accuracy import mape
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.selection import select_learner
from hpcpredict.daemon.lab.runtime.packing import save_application_model
from hpcpredict.daemon.runtime.served import ApplicationModels
from hpcpredict.daemon.lab.runtime.training import train_application

from .synthetic import power_law_table

INPUTS = ["n", "m", "p", "noise_a"]


def threshold_table(n_configs=80, reps=2, seed=0):
    """runtime = n · (3 if solver is lu and n > 30 else 1) · noise: a switch no power law has."""
    rng = np.random.default_rng(seed)
    lines = ["n,solver,rep,runtime"]
    for _ in range(n_configs):
        n, solver = int(rng.integers(5, 60)), str(rng.choice(["cg", "lu"]))
        value = n * (3.0 if solver == "lu" and n > 30 else 1.0)
        lines += [f"{n},{solver},{rep},{value * np.exp(rng.normal(0, 0.02)):.5f}" for rep in range(reps)]
    return parse_runs_csv("\n".join(lines), target="runtime")


@pytest.mark.parametrize("learner,params", [
    ("log-linear", {}),
    ("log-linear", {"interactions": False}),
    ("boosted-trees", {"max_iter": 40, "interval": "quantile"}),
    ("boosted-trees", {"max_iter": 40, "interactions": False}),
    ("boosted-trees", {"max_iter": 40, "interval": "constant"}),
])
def test_served_artifact_answers_as_the_fitted_model(tmp_path, learner, params):
    table = power_law_table(n_configs=50, reps=2, seed=5)
    model = RuntimeModel(learner, dict(params, random_state=0), inputs=INPUTS).fit(table)
    save_application_model(model, tmp_path, application="app", metadata={"version": "v"})
    description = json.loads((tmp_path / "app" / "inputs.json").read_text())
    assert description["format"] == f"hpcpredict-runtime-{learner}"
    for estimate in served_as_fitted(model, tmp_path, [table.rows[i] for i in range(0, len(table.y), 7)]):
        assert estimate.low_s < estimate.runtime_s < estimate.high_s
        assert estimate.model_name == f"runtime-{learner}/app/inputs"


def served_as_fitted(model, directory, rows):
    """The estimates the model saved in ``directory`` as application "app" serves for ``rows``,
    each asserted equal to the fitted model's centre and 80 % interval."""
    served = ApplicationModels.load(directory)
    centre = model.predict(rows)
    low, high = model.predict_interval(rows, 0.8)
    estimates = []
    for i, row in enumerate(rows):
        estimate = served.estimate("app", row, 0, 0, 0, coverage=0.8)
        assert estimate.runtime_s == pytest.approx(centre[i], rel=1e-9)
        assert (estimate.low_s, estimate.high_s) == (pytest.approx(low[i], rel=1e-9), pytest.approx(high[i], rel=1e-9))
        estimates.append(estimate)
    return estimates


def test_boosted_trees_learn_a_switch_that_the_log_linear_model_cannot():
    """The trees learn the step. Over a second-order trend (the default of both learners) the
    trend bends towards the step (log-linear 17 %), the trees still do better (11 %); over a
    first-order trend the contrast is the plain one (6 % vs 30 %; 35 % without the log-linear
    model's start-up term, which takes up a little of the step)."""
    table = threshold_table()
    train, test = split_by_configuration(table.groups, 0.5, 0)
    scores = {}
    for order, interactions in (("first", False), ("second", True)):
        for learner, extra in (("boosted-trees", {"max_iter": 60}), ("log-linear", {})):
            scores[order, learner] = evaluate(table, learner=learner, train_rows=train, test_rows=test, time_share=None,
                                              params=dict(extra, interactions=interactions))["mape"]
    assert scores["first", "boosted-trees"] < 0.1 < 0.25 < scores["first", "log-linear"]
    assert scores["second", "boosted-trees"] < 0.8 * scores["second", "log-linear"]


def exponent_switch_table(n_configs=60, reps=2, seed=0):
    """runtime = n^(2 if method is dft else 1) · noise: the category changes the scaling exponent."""
    rng = np.random.default_rng(seed)
    lines = ["n,method,rep,runtime"]
    for _ in range(n_configs):
        n, method = int(rng.integers(2, 40)), str(rng.choice(["scf", "dft"]))
        value = 0.01 * n ** (2.0 if method == "dft" else 1.0)
        lines += [f"{n},{method},{rep},{value * np.exp(rng.normal(0, 0.02)):.6f}" for rep in range(reps)]
    return parse_runs_csv("\n".join(lines), target="runtime")


def test_second_order_trend_learns_an_exponent_that_depends_on_a_category():
    """The trend's order alone (no start-up term: it takes up some of the bend, 19 % first order)."""
    table = exponent_switch_table()
    train, test = split_by_configuration(table.groups, 0.5, 0)
    scores = {interactions: evaluate(table, learner="log-linear", train_rows=train, test_rows=test, time_share=None,
                                     params={"interactions": interactions, "startup_shares": ()})["mape"]
              for interactions in (False, True)}
    assert scores[True] < 0.05 < 0.2 < scores[False]


def startup_table(startup=None, n_configs=60, reps=2, seed=0):
    """runtime = startup + 0.002·n·steps · noise (startup None: the work alone)."""
    rng = np.random.default_rng(seed)
    lines = ["n,steps,rep,runtime"]
    for _ in range(n_configs):
        n, steps = int(rng.integers(2, 60)), int(rng.integers(1, 20)) * 50
        value = (startup or 0.0) + 0.002 * n * steps
        lines += [f"{n},{steps},{rep},{value * np.exp(rng.normal(0, 0.02)):.6f}" for rep in range(reps)]
    return parse_runs_csv("\n".join(lines), target="runtime")


def test_log_linear_model_finds_a_start_up_time_and_serves_it(tmp_path):
    """A fixed start-up under a power law: the product of powers alone bends away from it at the
    short runs; the start-up term is chosen by cross-validation, served, and absent when there is none."""
    table = startup_table(startup=0.5)
    train, test = split_by_configuration(table.groups, 0.5, 0)
    scores = {(shares, order): evaluate(table, learner="log-linear", train_rows=train, test_rows=test, time_share=None,
                                        params={"startup_shares": shares, "interactions": order == 2})["mape"]
              for shares in ((), (0.3, 0.5)) for order in (1, 2)}
    # Measured: first order 7.0 % → 1.6 %; second order (whose squares bend towards the start-up) 2.7 % → 2.2 %.
    assert scores[(0.3, 0.5), 1] < 0.4 * scores[(), 1] and scores[(0.3, 0.5), 2] < scores[(), 2], scores
    model = RuntimeModel("log-linear", {"random_state": 0}).fit(table, train)
    assert model.estimator_.startup_ > 0
    save_application_model(model, tmp_path, application="app", metadata={})
    served = ApplicationModels.load(tmp_path)
    rows = [table.rows[i] for i in test[:10]]
    assert [served.estimate("app", row, 0, 0, 0).runtime_s for row in rows] == pytest.approx(model.predict(rows), rel=1e-9)
    assert "start-up" in served.estimate("app", rows[0], 0, 0, 0).explanation[0]
    plain = RuntimeModel("log-linear", {"random_state": 0}).fit(startup_table(startup=None))
    assert plain.estimator_.startup_ == 0.0


def test_trend_pairs_naming_missing_inputs_are_refused(tmp_path):
    table = exponent_switch_table()
    model = RuntimeModel("log-linear", {"interactions": True, "random_state": 0}).fit(table)
    save_application_model(model, tmp_path, application="app", metadata={})
    npz, meta = tmp_path / "app" / "inputs.npz", tmp_path / "app" / "inputs.json"
    with np.load(npz, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["trend_pairs"] = arrays["trend_pairs"] + 10
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    npz.write_bytes(buffer.getvalue())
    description = json.loads(meta.read_text())
    import hashlib
    description["arrays_sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    meta.write_text(json.dumps(description))
    with pytest.raises(ModelArtifactError, match="pairs"):
        ApplicationModels.load(tmp_path)


def test_corrupt_boosted_artifact_is_refused(tmp_path):
    table = power_law_table(n_configs=30, reps=2, seed=1)
    model = RuntimeModel("boosted-trees", {"max_iter": 10, "random_state": 0}, inputs=INPUTS).fit(table)
    save_application_model(model, tmp_path, application="app", metadata={})
    npz, meta = tmp_path / "app" / "inputs.npz", tmp_path / "app" / "inputs.json"
    with np.load(npz, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["centre_feature"] = arrays["centre_feature"] + 50   # splits on inputs that do not exist
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    npz.write_bytes(buffer.getvalue())
    description = json.loads(meta.read_text())
    import hashlib
    description["arrays_sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    meta.write_text(json.dumps(description))
    with pytest.raises(ModelArtifactError, match="shapes"):
        ApplicationModels.load(tmp_path)
    description["boosted_parts"] = ["lower"]
    meta.write_text(json.dumps(description))
    with pytest.raises(ModelArtifactError, match="parts missing"):
        ApplicationModels.load(tmp_path)


def test_simple_model_served_when_nothing_richer_pays():
    # A pure power law with 10 % noise: the log-log model is the truth; trees only fit noise.
    rng = np.random.default_rng(2)
    lines = ["n,m,p,rep,runtime"]
    for _ in range(25):
        n, m, p = int(rng.integers(10, 60)), int(rng.integers(1, 20)), int(rng.choice([1, 2, 4, 8]))
        lines += [f"{n},{m},{p},{rep},{0.01 * n * n * m / p * np.exp(rng.normal(0, 0.1)):.6f}" for rep in range(2)]
    table = parse_runs_csv("\n".join(lines), target="runtime")
    rows = np.arange(len(table.y))
    chosen, scores = select_learner(table, rows, inputs=["n", "m", "p"],
                                    candidates={"log-linear": {}, "boosted-trees": {"max_iter": 60}})
    assert chosen == "log-linear", scores


def test_richer_learner_chosen_when_it_wins_cross_validation():
    table = threshold_table()
    chosen, scores = select_learner(table, np.arange(len(table.y)),
                                    candidates={"log-linear": {}, "boosted-trees": {"max_iter": 60}})
    assert chosen == "boosted-trees" and scores["boosted-trees"] < 0.95 * scores["log-linear"], scores


def test_evaluate_auto_scores_exactly_the_model_train_runtime_publishes(tmp_path):
    """Train the published way on the training configurations; the held-out MAPE of the
    published artifact must be the one ``evaluate(learner="auto")`` reports."""
    table = threshold_table(n_configs=30, reps=2, seed=4)
    train, test = split_by_configuration(table.groups, 0.5, 0)
    result = evaluate(table, learner="auto", train_rows=train, test_rows=test, time_share=None, seed=0)
    csv = tmp_path / "train.csv"
    csv.write_text("n,solver,rep,runtime\n" + "\n".join(
        f"{table.rows[i]['n']},{table.rows[i]['solver']},{i},{float(table.y[i])!r}" for i in train))
    # `rep` differs per row above, so configurations are identified by their inputs, as in `table`
    summary = train_application(csv, target="runtime", application="app", directory=tmp_path / "m", seed=0)
    assert summary["inputs"]["learner"] == result["learner"]
    assert summary["inputs"]["selection"]["reason"] == result["selection"]["reason"]
    served = ApplicationModels.load(tmp_path / "m")
    predicted = [served.estimate("app", table.rows[i], 0, 0, 0).runtime_s for i in test]
    assert mape(table.y[test], np.array(predicted)) == pytest.approx(result["mape"], rel=1e-9)
