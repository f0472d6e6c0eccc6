"""Adaptive modeler: shipped non-pickle weights, classifier proposals, domain adaptation."""
import json
import zipfile

import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.scaling.adaptive import (
    PRETRAINED_PATH, AdaptiveModeler, ClassifierWeights, domain_adapt, line_features)
from hpcpredict.daemon.scaling.measurements import parse_jsonlines
from hpcpredict.daemon.scaling.pmnf import CLASSES, factor


def test_shipped_weights_are_small_plain_arrays():
    assert PRETRAINED_PATH.stat().st_size < 2_000_000
    with zipfile.ZipFile(PRETRAINED_PATH) as archive:           # npz = zip of .npy, no pickle
        assert all(name.endswith(".npy") for name in archive.namelist())
    with np.load(PRETRAINED_PATH, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
    assert len(meta["classes"]) == len(CLASSES) == 43
    weights = ClassifierWeights.load(PRETRAINED_PATH)
    assert weights.coefs[-1].shape[1] == 43


def test_bad_weights_file_is_a_model_artifact_error(tmp_path):
    path = tmp_path / "w.npz"
    np.savez(path, coef_0=np.zeros((3, 3)), intercept_0=np.zeros(3))
    with pytest.raises(ModelArtifactError, match="wrong shape"):
        ClassifierWeights.load(path)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ModelArtifactError, match="junk.npz"):
        ClassifierWeights.load(tmp_path / "junk.npz")


def test_pretrained_top3_usually_contains_the_true_class_on_calm_data():
    weights = ClassifierWeights.load(PRETRAINED_PATH)
    x = np.array([4.0, 8, 16, 32, 64])
    rng = np.random.default_rng(3)
    hits = 0
    picks = [CLASSES[k] for k in rng.choice(len(CLASSES), 40, replace=False)]
    for pair in picks:
        y = 50 + 20 * factor(x, pair)
        probabilities = weights.probabilities(line_features(x, y, 0.0)[None])[0]
        top = [CLASSES[k] for k in np.argsort(probabilities)[::-1][:3]]
        hits += pair in top
    assert hits >= 20          # far above chance (3/43 -> ~3 of 40)


def test_domain_adaptation_changes_weights_and_keeps_shapes():
    weights = ClassifierWeights.load(PRETRAINED_PATH)
    adapted = domain_adapt(weights, np.array([10.0, 20, 30, 40, 50]), (0.2, 0.5), 3,
                           samples_per_class=10, epochs=1)
    assert [c.shape for c in adapted.coefs] == [c.shape for c in weights.coefs]
    assert any(not np.allclose(a, b) for a, b in zip(adapted.coefs, weights.coefs))


def test_adaptive_fit_on_noisy_two_parameter_data():
    rng = np.random.default_rng(0)
    lines = []
    for p in (4, 8, 16, 32, 64):
        for n in (10, 20, 30, 40, 50):
            clean = 20 + 3 * p * n ** 0.5
            lines.append(json.dumps({"params": {"p": p, "n": n},
                                     "value": list(clean * (1 + rng.uniform(-0.1, 0.1, 5)))}))
    data = parse_jsonlines(lines)[("<root>", "time")]
    modeler = AdaptiveModeler(samples_per_class=20, epochs=1)
    fit = modeler.fit(data)
    assert fit.modeler == "adaptive" and 0.1 < fit.noise < 0.3
    lead = fit.function.lead_exponents()
    assert abs(lead["p"][0] - 1.0) <= 0.5 and abs(lead["n"][0] - 0.5) <= 0.5
    truth = 20 + 3 * 128 * 60 ** 0.5
    assert fit.function.evaluate({"p": 128.0, "n": 60.0}) == pytest.approx(truth, rel=0.3)
    assert len(modeler._adapted) >= 1          # adapted once per task shape, then cached


def test_noisy_line_takes_the_classifiers_top_plausible_class():
    weights = ClassifierWeights.load(PRETRAINED_PATH)
    modeler = AdaptiveModeler(weights, adapt=False)
    x = np.array([4.0, 8, 16, 32, 64])
    rng = np.random.default_rng(5)
    y = (30 + 2 * x) * (1 + rng.uniform(-0.3, 0.3, 5))
    noisy = modeler.candidates(x, y, 0.6, (0.3, 0.6), 5, classifier_only=True)
    assert len(noisy) == 1
    probabilities = weights.probabilities(line_features(x, y, 0.6)[None])[0]
    order = [CLASSES[k] for k in np.argsort(probabilities)[::-1][:3]]
    assert noisy[0] in order
    calm = modeler.candidates(x, y, 0.6, (0.3, 0.6), 5, classifier_only=False)
    assert noisy[0] in calm and len(calm) >= 2
