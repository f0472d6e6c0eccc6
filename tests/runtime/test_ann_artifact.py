"""The ANN ensemble served from plain arrays, and the learner chosen per application by CV."""
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.lab.runtime.ann import ANNEnsemble
from hpcpredict.daemon.runtime.compiled_ann import CompiledEnsemble
from hpcpredict.daemon.runtime.conformal import conformal_multiplier
from hpcpredict.daemon.lab.runtime.dataset import read_runs_csv
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.packing import save_application_model
from hpcpredict.daemon.runtime.served import ApplicationModels
from hpcpredict.daemon.lab.runtime.training import train_application

from .synthetic import power_law_table

ANN = {"n_members": 4, "max_epochs": 150, "random_state": 0}
INPUTS = ["n", "m", "p", "noise_a"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fitted():
    table = power_law_table(n_configs=60, reps=2, seed=3)
    return table, RuntimeModel("ann", ANN, inputs=INPUTS).fit(table)


@pytest.fixture(scope="module")
def site(fitted, tmp_path_factory):
    table, model = fitted
    root = tmp_path_factory.mktemp("ann-site")
    save_application_model(model, root, application="solver", metadata={"version": "a1"})
    trees = RuntimeModel("extra-trees", {"n_estimators": 10, "random_state": 0}, inputs=["n", "m", "p"]).fit(table)
    save_application_model(trees, root, application="legacy", metadata={"version": "t1"})
    return root


def test_loaded_ann_predicts_exactly_like_the_fitted_ensemble(fitted, site):
    table, model = fitted
    models = ApplicationModels.load(site)
    estimator = model.estimator_
    for row in table.rows[:12] + [{"n": 500.0, "m": 1.0, "p": 8.0, "noise_a": 0.5}]:  # last: far outside
        estimate = models.estimate("solver", row, nodes=1, ntasks=0, cpus_per_task=0, coverage=0.8,
                                   bound_coverage=0.95)
        expected = model.predict([row])[0]
        low, high = model.predict_interval([row], 0.8)
        assert estimate.runtime_s == pytest.approx(expected, rel=1e-9)
        assert estimate.low_s == pytest.approx(low[0], rel=1e-9)
        assert estimate.high_s == pytest.approx(high[0], rel=1e-9)
        # Calibrated like extra-trees: exp(m ± q·s), q the conformal quantile of held-out scores.
        m, s = estimator.predict_log_dist(model.matrix([row]))
        q95 = conformal_multiplier(estimator.calibration_scores_, 0.95)
        assert estimate.bound_s == pytest.approx(np.exp(m[0] + q95 * s[0]), rel=1e-9)
        assert estimate.model_name == "runtime-ann/solver/inputs" and estimate.model_version == "a1"
    assert "ANN ensemble (4 nets" in models.estimate("solver", table.rows[0], 1, 0, 0).explanation[0]
    # Extra-trees artifacts load beside it, under their own name.
    assert models.estimate("legacy", table.rows[0], 1, 0, 0).model_name == "runtime-extra-trees/legacy/inputs"


def test_artifact_is_plain_arrays_and_json(site):
    description = json.loads((site / "solver" / "inputs.json").read_text())
    assert description["format"] == "hpcpredict-runtime-ann" and description["learner"] == "ann"
    assert description["ann"]["activation"] == "logistic" and description["ann"]["n_members"] == 4
    with np.load(site / "solver" / "inputs.npz", allow_pickle=False) as data:
        assert {"W0", "W1", "b0", "b1", "calibration_scores", "target_scaling"} <= set(data.files)
        assert data["W0"].shape == (4, len(INPUTS), 16) and data["W1"].shape == (4, 16, 1)


@pytest.mark.parametrize("params", [
    {"activation": "tanh", "hidden_layer_sizes": (8, 5)},
    {"activation": "relu", "target": "weighted"},
])
def test_compiled_forward_pass_matches_sklearn_members(params):
    rng = np.random.default_rng(2)
    X = rng.uniform(1, 20, size=(50, 3))
    X[::7, 1] = np.nan  # missing inputs are filled the same way
    y = X[:, 0] * np.nan_to_num(X[:, 1], nan=3.0) + X[:, 2]
    ensemble = ANNEnsemble(n_members=3, max_epochs=40, random_state=1, **params).fit(X, y)
    compiled = CompiledEnsemble.from_arrays(CompiledEnsemble.from_sklearn(ensemble).arrays(),
                                            CompiledEnsemble.from_sklearn(ensemble).settings())
    np.testing.assert_allclose(compiled.log_members(X), np.log(ensemble.predict_members(X)), rtol=1e-9)
    m, s = compiled.mean_std(X[:1])
    expected_m, expected_s = ensemble.predict_log_dist(X[:1])
    np.testing.assert_allclose([m[0], s[0]], [expected_m[0], expected_s[0]], rtol=1e-9)
    # Predict's one-row pass (standardisation folded into the first layer) gives the same numbers
    centres, spreads = compiled.mean_std(X)
    one_row = np.array([compiled.log_dist_one(row.copy()) for row in X])
    np.testing.assert_allclose(one_row[:, 0], centres, rtol=1e-9)
    np.testing.assert_allclose(one_row[:, 1], spreads, rtol=1e-7)


def _rewrite(root: Path, change):
    description = json.loads((root / "solver" / "inputs.json").read_text())
    with np.load(root / "solver" / "inputs.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    change(description, arrays)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    (root / "solver" / "inputs.npz").write_bytes(buffer.getvalue())
    description["arrays_sha256"] = hashlib.sha256(buffer.getvalue()).hexdigest()
    (root / "solver" / "inputs.json").write_text(json.dumps(description))


@pytest.mark.parametrize("change", [
    lambda d, a: a.update(W1=a["W1"][:, :3, :]),                    # layer sizes do not chain
    lambda d, a: a.update(W0=np.full_like(a["W0"], np.nan)),         # non-finite weights
    lambda d, a: a.pop("b0"),                                        # missing array
    lambda d, a: d["ann"].update(activation="softmax"),              # unknown activation
    lambda d, a: d.pop("ann"),                                       # settings missing
    lambda d, a: a.update(fill=a["fill"][:2]),                       # does not match the encoder
])
def test_corrupt_ann_artifacts_are_refused(site, tmp_path, change):
    import shutil
    root = tmp_path / "models"
    shutil.copytree(site, root)
    _rewrite(root, change)
    with pytest.raises(ModelArtifactError, match="corrupt"):
        ApplicationModels.load(root)


def test_training_chooses_the_learner_by_cross_validation(tmp_path):
    data = tmp_path / "runs.csv"
    table = power_law_table(n_configs=40, reps=2, seed=9)
    lines = ["n,m,p,rep,runtime"] + [f"{r['n']:g},{r['m']:g},{r['p']:g},{i % 2},{y}"
                                     for i, (r, y) in enumerate(zip(table.rows, table.y))]
    data.write_text("\n".join(lines) + "\n")
    summary = train_application(data, target="runtime", application="pl", directory=tmp_path / "m",
                                learners={"extra-trees": {"n_estimators": 15}, "ann": dict(ANN, n_members=3)})
    meta = summary["inputs"]
    scores = meta["cv_mape_by_learner"]
    assert set(scores) == {"extra-trees", "ann"} and all(0 < v < 1 for v in scores.values())
    assert meta["learner"] == min(scores, key=scores.get) and meta["cv_mape"] == scores[meta["learner"]]
    stored = json.loads((tmp_path / "m" / "pl" / "inputs.json").read_text())
    assert stored["learner"] == meta["learner"] and stored["metadata"]["cv_mape_by_learner"] == scores
    served = ApplicationModels.load(tmp_path / "m").estimate("pl", table.rows[0], 1, 0, 0)
    assert served.model_name == f"runtime-{meta['learner']}/pl/inputs"
    with pytest.raises(ValueError, match="linear"):
        train_application(data, target="runtime", application="pl", directory=tmp_path / "x",
                          learners={"linear": {}})


def test_published_extra_trees_artifact_still_loads():
    """An artifact written before ANN serving existed (format unchanged) still loads and answers."""
    model_dir = REPO / "tests" / "data" / "runtime" / "extra-trees-artifact-v1"
    models = ApplicationModels.load(model_dir)
    table = read_runs_csv(REPO / "tests" / "data" / "runtime" / "lammps_melt.csv", target="runtime_s")
    estimate = models.estimate("lmp", table.rows[0], nodes=1, ntasks=1, cpus_per_task=1)
    assert estimate.model_name.startswith("runtime-extra-trees/lmp")
    assert abs(estimate.runtime_s - table.y[0]) / table.y[0] < 0.5
