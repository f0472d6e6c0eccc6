"""The blended point answer (accuracy-optimal point over the experts) and format-3 persistence."""
import hashlib
import json
import math

import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.history.model import WalltimeModel
from hpcpredict.daemon.history.persist import load_model, save_model
from hpcpredict.daemon.lab.history.training import train_model
from hpcpredict.daemon.history.persist import FORMAT_VERSION

from .test_predictors import ended, new, synthetic_users


def trained(seed=11, n_jobs=1200):
    model = WalltimeModel()
    for job in sorted(synthetic_users(seed=seed, n_jobs=n_jobs), key=lambda j: j.end_time):
        model.observe(job)
    return model


def test_blend_maximises_the_weighted_accuracy_over_all_points():
    model = trained()
    experts, features = model._experts(new("u3", 5000.0))
    weights = np.clip(model.state.selector @ features, 1e-3, 1.0) ** model.params.blend_power
    blend = model._blend(experts, features)
    assert blend in experts                 # the metric is convex between experts: p* is one of them
    grid = np.linspace(experts.min() - 1, experts.max() + 1, 20001)
    objective = np.exp(-np.abs(grid[:, None] - experts[None, :])) @ weights
    best = float(np.exp(-np.abs(blend - experts)) @ weights)
    assert best >= objective.max() - 1e-9


def test_blend_answers_only_for_a_user_where_it_scored_better():
    model = trained()
    for user in (f"u{i}" for i in range(40)):   # a probe where the two answers differ
        probe = new(user, 5000.0, job_id="")
        experts, features = model._experts(probe)
        selected = float(experts[model._choose(features)])
        blend = model._blend(experts, features)
        if not math.isclose(selected, blend):
            break
    else:
        pytest.fail("blend and selected expert agree for every user")
    other = next(f"u{i}" for i in range(40) if f"u{i}" != user and model._experts(new(f"u{i}", 5000.0)))
    model.state.blend_advantage = {user: 0.05, None: -0.05}
    with_blend = model.predict(probe)
    assert with_blend.runtime_s == pytest.approx(math.exp(blend))
    assert "where most estimates from your history agree" in " ".join(with_blend.explanation)
    model.state.blend_advantage = {user: -0.05, None: 0.05}
    without = model.predict(probe)
    assert without.runtime_s == pytest.approx(math.exp(selected))
    # the limit is calibrated on the selected expert either way, and never below the point
    assert with_blend.bound_s == pytest.approx(max(without.bound_s, with_blend.runtime_s))
    model.state.blend_advantage = {None: 0.05}          # a user without a record follows the cluster
    assert model.predict(new(other, 5000.0, job_id="")).runtime_s == pytest.approx(
        math.exp(model._blend(*model._experts(new(other, 5000.0)))))


def test_blend_record_learns_from_the_ended_job_only():
    model = trained()
    job = ended(10**6, "u3", 1500.0, 5000.0, t=1e9)
    answer_before = dict(model.state.blend_advantage)
    model.submit(job)
    assert model.state.blend_advantage == answer_before          # answering never trains
    experts, features, selected, _, _, _, blend = model.state.pending[job.job_id]
    runtime = math.log(1500.0)
    gain = math.exp(-abs(blend - runtime)) - math.exp(-abs(selected - runtime))
    model.observe(job)
    before = answer_before.get("u3", 0.0)
    assert model.state.blend_advantage["u3"] == pytest.approx(before + model.params.blend_user_rate * (gain - before))


def test_blend_record_survives_save_and_load(tmp_path):
    model = train_model(synthetic_users(seed=12, n_jobs=800))
    assert model.state.blend_advantage, "training must score the blend"
    save_model(model, tmp_path / "m")
    assert json.loads((tmp_path / "m" / "manifest.json").read_text())["format_version"] == FORMAT_VERSION == 5
    assert load_model(tmp_path / "m").state.blend_advantage == model.state.blend_advantage


def _rewrite(directory, version, drop_blend):
    state = json.loads((directory / "state.json").read_text())
    if drop_blend:
        del state["blend_advantage"]
        for key in ("blend_power", "blend_user_rate", "blend_global_rate"):
            del state["params"][key]
    payload = json.dumps(state).encode()
    (directory / "state.json").write_bytes(payload)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest.update(format_version=version, sha256=hashlib.sha256(payload).hexdigest())
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_a_format_2_model_still_loads_and_answers_with_the_selected_expert(tmp_path):
    model = train_model(synthetic_users(seed=13, n_jobs=800))
    save_model(model, tmp_path / "m")
    _rewrite(tmp_path / "m", 2, drop_blend=True)
    old = load_model(tmp_path / "m")
    assert old.state.blend_advantage == {}
    probe = new("u3", 5000.0, job_id="")
    experts, features = old._experts(probe)
    assert old.predict(probe).runtime_s == pytest.approx(math.exp(experts[old._choose(features)]))


def test_format_1_is_refused_with_a_clear_message(tmp_path):
    save_model(train_model(synthetic_users(seed=14, n_jobs=200)), tmp_path / "m")
    _rewrite(tmp_path / "m", 1, drop_blend=False)
    with pytest.raises(ModelArtifactError, match="format version 1 .*reads 2, 3"):
        load_model(tmp_path / "m")
