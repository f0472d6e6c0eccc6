"""The blend candidate (mean in log space of several learners): contract, interval, artifact, choice."""
import hashlib
import io
import json

import numpy as np
import pytest

from hpcpredict.daemon.cli.main import main
from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.lab.runtime.blend import FALLBACK, MEMBERS, BlendRuntime, with_fallback
from hpcpredict.daemon.runtime.conformal import conformal_multiplier
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.selection import CANDIDATES, out_of_fold_errors, without_calibration
from hpcpredict.daemon.lab.runtime.packing import save_application_model
from hpcpredict.daemon.runtime.served import ApplicationModels

from .synthetic import power_law_table
from .test_served_learners import served_as_fitted

INPUTS = ["n", "m", "p", "noise_a"]
SMALL_ANN = {"n_members": 3}
SMALL = {"member_params": {"boosted-trees": {"max_iter": 30}, "ann": SMALL_ANN}, "calibration_folds": 10,
         "random_state": 0}


@pytest.fixture(scope="module")
def table():
    return power_law_table(n_configs=50, reps=2, seed=7)


@pytest.fixture(scope="module")
def fitted(table):
    return RuntimeModel("blend", SMALL, inputs=INPUTS).fit(table)


def test_blend_is_the_geometric_mean_of_its_members_fitted_alone(table, fitted):
    """Each member is the model its learner fits alone with the same seed (without calibration),
    and the blend's runtime is the geometric mean of theirs."""
    rows = table.rows[:10]
    logs = []
    assert [name for name, _ in fitted.estimator_.members_] == list(MEMBERS)
    for name in MEMBERS:
        params = without_calibration(name, dict(SMALL["member_params"].get(name, {}), random_state=0))
        if name == "ann":
            params = dict(SMALL_ANN, random_state=0)
        logs.append(np.log(RuntimeModel(name, params, inputs=INPUTS).fit(table).predict(rows)))
    assert fitted.predict(rows) == pytest.approx(np.exp(np.mean(logs, axis=0)), rel=1e-9)


def test_interval_is_calibrated_on_the_blends_own_held_out_residuals(table, fitted):
    estimator = fitted.estimator_
    # one score per run, each from a fold blend that did not see the run's configuration
    assert estimator.calibration_scores_.shape == (len(table.y),)
    rows = table.rows[:5]
    low, high = fitted.predict_interval(rows, 0.8)
    m, s = estimator.predict_log_dist(fitted.matrix(rows))
    q = conformal_multiplier(estimator.calibration_scores_, 0.8)
    assert np.all(s == 1.0)
    assert low == pytest.approx(np.exp(m - q), rel=1e-12) and high == pytest.approx(np.exp(m + q), rel=1e-12)
    # On new runs of the same function the 80 % interval covers about 80 % of them.
    new = power_law_table(n_configs=80, reps=2, seed=8)
    low, high = fitted.predict_interval(new.rows, 0.8)
    covered = np.mean((new.y >= low) & (new.y <= high))
    assert 0.65 <= covered <= 0.95, covered


def test_served_blend_answers_as_the_fitted_model(table, fitted, tmp_path):
    save_application_model(fitted, tmp_path, application="app", metadata={"version": "b1"})
    description = json.loads((tmp_path / "app" / "inputs.json").read_text())
    assert description["format"] == "hpcpredict-runtime-blend"
    assert [m["learner"] for m in description["blend_members"]] == ["gaussian-process", "boosted-trees", "ann"]
    rows = table.rows[::9] + [{"n": 500.0, "m": 1.0, "p": 8.0, "noise_a": 0.5}]   # last: far outside
    estimates = served_as_fitted(fitted, tmp_path, rows)
    for estimate in estimates:
        assert estimate.model_name == "runtime-blend/app/inputs" and estimate.model_version == "b1"
    assert "blend (mean in log space) of Gaussian-process model" in estimates[0].explanation[0]


def _rewrite(folder, arrays=None, description=None):
    npz, meta = folder / "app" / "inputs.npz", folder / "app" / "inputs.json"
    if arrays is not None:
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        npz.write_bytes(buffer.getvalue())
    description = description if description is not None else json.loads(meta.read_text())
    description["arrays_sha256"] = hashlib.sha256(npz.read_bytes()).hexdigest()
    meta.write_text(json.dumps(description))


@pytest.mark.parametrize("damage,message", [
    ("drop member arrays", "gaussian-process arrays"),
    ("nested blend", "not a servable learner"),
    ("one member", "members missing"),
    ("member settings missing", "settings missing"),
])
def test_corrupt_blend_artifacts_are_refused(fitted, tmp_path, damage, message):
    save_application_model(fitted, tmp_path, application="app", metadata={})
    with np.load(tmp_path / "app" / "inputs.npz", allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    description = json.loads((tmp_path / "app" / "inputs.json").read_text())
    if damage == "drop member arrays":
        _rewrite(tmp_path, arrays={k: v for k, v in arrays.items() if not k.startswith("member0_")})
    elif damage == "nested blend":
        description["blend_members"][1]["learner"] = "blend"
        _rewrite(tmp_path, description=description)
    elif damage == "one member":
        description["blend_members"] = description["blend_members"][:1]
        _rewrite(tmp_path, description=description)
    else:
        del description["blend_members"][2]["settings"]
        _rewrite(tmp_path, description=description)
    with pytest.raises(ModelArtifactError, match=message):
        ApplicationModels.load(tmp_path)


@pytest.mark.parametrize("members,member_params", [
    (("log-linear",), None),
    (("log-linear", "log-linear"), None),
    (("log-linear", "blend"), None),
    (("log-linear", "boosted-trees"), {"ann": {}}),
])
def test_bad_members_are_a_clear_error(table, members, member_params):
    with pytest.raises(ValueError, match="blend"):
        BlendRuntime(members=members, member_params=member_params).fit(np.ones((4, 1)) * [[1], [2], [3], [4]],
                                                                        np.array([1.0, 2, 3, 4]))


def test_cross_validated_blend_is_the_mean_of_its_members_out_of_fold_predictions(table):
    """The choice cross-validates the blend on the same folds as its members: a run's
    out-of-fold blend prediction is the geometric mean of the members' out-of-fold predictions."""
    from hpcpredict.daemon.runtime.conformal import group_folds

    rows = np.arange(len(table.y))
    members = {"log-linear": {}, "boosted-trees": {"max_iter": 30}}
    blend = {"members": tuple(members), "member_params": {"boosted-trees": {"max_iter": 30}}}
    blend_errors = out_of_fold_errors(table, rows, "blend", blend, inputs=INPUTS, seed=3)
    predictions = {name: np.empty(rows.size) for name in members}
    for held_out in group_folds(table.groups, 5, 3):   # the folds out_of_fold_errors uses
        for name, params in members.items():
            model = RuntimeModel(name, dict(without_calibration(name, params), random_state=3), INPUTS)
            model.fit(table, rows[~held_out])
            predictions[name][held_out] = model.predict([table.rows[i] for i in rows[held_out]])
    blended = np.sqrt(predictions["log-linear"] * predictions["boosted-trees"])
    assert blend_errors == pytest.approx(np.abs(blended - table.y) / table.y, rel=1e-9)
    assert "blend" in CANDIDATES and list(CANDIDATES)[-1] == "blend"   # listed last (the hedge)


def test_evaluate_runtime_and_train_application_serve_the_blend(capsys, tmp_path):
    """``hpcpredict evaluate runtime --learner blend`` scores the served blend (default members);
    ``train_application`` (what ``train-runtime --learner blend`` calls) publishes it."""
    from hpcpredict.daemon.lab.runtime.training import train_application

    csv = tmp_path / "runs.csv"
    csv.write_text("n,m,t\n" + "\n".join(f"{n},{m},{n * n * m / 100:.4f}" for n in range(5, 40, 3) for m in (1, 2, 3)))
    assert main(["evaluate", "runtime", str(csv), "--target", "t", "--learner", "blend", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["learner"] == "blend" and result.get("runs_not_served", 0) == 0
    assert result["mape"] < 0.2
    summary = train_application(csv, target="t", application="demo", directory=tmp_path / "models",
                                learners={"blend": SMALL})
    assert summary["inputs"]["learner"] == "blend"
    estimate = ApplicationModels.load(tmp_path / "models").estimate("demo", {"n": 20.0, "m": 2.0}, 1, 1, 1)
    assert estimate.model_name == "runtime-blend/demo/inputs"
    assert abs(estimate.runtime_s - 8.0) / 8.0 < 0.2


@pytest.mark.parametrize("n,coverage", [(10, 0.8), (20, 0.8), (50, 0.95)])
def test_conformal_rank_gives_its_finite_sample_coverage(n, coverage):
    """With n exchangeable scores, the interval covers a new run with probability
    ceil((n+1)c)/(n+1): at least c, and less than c + 1/(n+1). The rule without the +1
    (the ceil(n·c)-th score) would cover less than c."""
    rng = np.random.default_rng(n)
    trials = 40_000
    scores = rng.exponential(size=(trials, n + 1))
    q = np.array([conformal_multiplier(row[:n], coverage) for row in scores])
    covered = float(np.mean(scores[:, n] <= q))
    expected = np.ceil((n + 1) * coverage) / (n + 1)
    assert covered == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / trials))
    assert coverage <= expected < coverage + 1 / (n + 1)
    without_plus_one = np.sort(scores[:, :n], axis=1)[:, int(np.ceil(n * coverage)) - 1]
    assert np.mean(scores[:, n] <= without_plus_one) < coverage


def test_a_member_that_cannot_model_the_runs_is_replaced_by_the_log_log_model():
    """With fewer configurations than the Gaussian process needs, the blend holds the log-log model
    in its place, fitted as alone; cross-validation blends that model's out-of-fold predictions."""
    small = power_law_table(n_configs=15, reps=2, seed=7)
    blend = RuntimeModel("blend", SMALL, inputs=INPUTS).fit(small)
    assert [name for name, _ in blend.estimator_.members_] == [FALLBACK, "boosted-trees", "ann"]
    alone = RuntimeModel(FALLBACK, without_calibration(FALLBACK, {"random_state": 0}), inputs=INPUTS).fit(small)
    member = blend.estimator_.members_[0][1]
    X = blend.matrix(small.rows[:5])
    assert member.predict(X) == pytest.approx(alone.estimator_.predict(X), rel=1e-12)
    a, b, c = np.full(3, 1.0), np.full(3, 2.0), np.full(3, 4.0)
    assert with_fallback({"gaussian-process": None, "log-linear": a, "ann": c}, ("gaussian-process", "ann")) == [a, c]
    assert with_fallback({"gaussian-process": b, "log-linear": a, "ann": c}, ("gaussian-process", "ann")) == [b, c]
    assert with_fallback({"gaussian-process": None, "ann": c}, ("gaussian-process", "ann")) is None   # no fallback
    assert with_fallback({"gaussian-process": None, "log-linear": a, "ann": c},
                         ("log-linear", "gaussian-process", "ann")) is None   # it would stand in beside itself
