"""One declaration per learner: the lab's estimator registry and the daemon's predictor registry agree."""
import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.lab.runtime import model  # noqa: F401  (registers every learner)
from hpcpredict.daemon.lab.runtime.learners import LEARNERS, make_learner, register_learner
from hpcpredict.daemon.lab.runtime.packing import pack
from hpcpredict.daemon.lab.runtime.selection import CANDIDATES
from hpcpredict.daemon.runtime.artifacts import PREDICTORS, SERVABLE, format_of, learner_of_format, unpack


def test_every_served_predictor_has_the_lab_learner_of_its_name():
    served = {name: cls.served for name, cls in LEARNERS.items() if cls.served is not None}
    assert set(served) == set(SERVABLE)
    for name, predictor in served.items():
        assert predictor.learner == name and PREDICTORS.get(format_of(name)) is predictor
        assert learner_of_format(format_of(name)) == name


def test_a_learner_without_a_served_form_cannot_be_packed():
    assert LEARNERS.get("linear").served is None
    with pytest.raises(ModelArtifactError, match="only fitted"):
        pack(make_learner("linear"))
    with pytest.raises(ModelArtifactError, match="only fitted"):
        pack(make_learner("log-linear"))   # not fitted


def test_an_unknown_format_is_refused_with_the_known_ones():
    assert learner_of_format("hpcpredict-runtime-forest") is None
    with pytest.raises(ModelArtifactError, match="unknown runtime model format 'hpcpredict-runtime-forest'"):
        unpack("hpcpredict-runtime-forest", {}, 1, {})


def test_a_learner_named_unlike_its_predictor_is_refused():
    with pytest.raises(ValueError, match="served by the predictor of 'ann'"):
        register_learner("not-ann", served=PREDICTORS.get(format_of("ann")))


def test_a_packed_learner_unpacks_to_the_same_log_prediction():
    rng = np.random.default_rng(0)
    X = rng.uniform(1, 10, size=(60, 2))
    y = X[:, 0] ** 2 * X[:, 1] * np.exp(rng.normal(0, 0.05, 60))
    fitted = make_learner("log-linear", calibration_folds=3, random_state=0).fit(X, y)
    learner, arrays, settings = pack(fitted)
    predictor = unpack(format_of(learner), arrays, 2, settings)
    assert predictor.log_dist(X[0])[0] == pytest.approx(float(fitted.predict_log_dist(X[:1])[0][0]))


def test_the_learner_choice_orders_every_servable_learner():
    """``selection.CANDIDATES`` is the choice's order (simplest first), not a list of learners:
    a learner served without a place in it would never be chosen by ``auto``."""
    assert set(CANDIDATES) == set(SERVABLE)


def test_the_daemon_loads_the_bundled_runtime_model_without_the_lab():
    """The artifact is the interface: loading a published runtime model imports no lab module."""
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; import hpcpredict.daemon as d; "
            "from hpcpredict.daemon.runtime.served import ApplicationModels; "
            "root = Path(d.__file__).parent / 'bundled_models' / 'runtime' / '_site'; "
            "models = ApplicationModels.load(root / (root / 'CURRENT').read_text().strip() / 'model'); "
            "assert models.applications() == ['lmp']; "
            "print(sorted(m for m in sys.modules if '.lab' in m))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "[]"
