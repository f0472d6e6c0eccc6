"""The Gaussian-process learner: a smooth sum of costs learned where a product of powers cannot
follow it, served from plain arrays as fitted, refused when
corrupt, skipped by the learner choice outside its configurations' bounds."""
import json
from pathlib import Path

import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.lab.runtime.applications import declared_derived
from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv, read_runs_csv
from hpcpredict.daemon.lab.runtime.evaluation import evaluate, split_by_configuration
from hpcpredict.daemon.lab.runtime.gaussian_process import GaussianProcessRuntime
from hpcpredict.daemon.lab.runtime.learners import LearnerNotApplicable
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.selection import select_learner
from hpcpredict.daemon.lab.runtime.packing import save_application_model
from hpcpredict.daemon.runtime.served import ApplicationModels

from .test_served_learners import served_as_fitted
from .test_startup_steps import _rewrite

DATA = Path(__file__).parent.parent / "data" / "runtime"


def melt_like_table(n_configs=80, reps=2, seed=0, noise=0.02):
    """runtime = 0.1 + steps · atoms · cache(atoms) · (cut³ + 3 · √temp / skin) · 1e-6 · noise, as
    LAMMPS's pair work plus its neighbour-list builds, the cost per atom rising smoothly 2.5-fold
    where the atoms outgrow a cache (a logistic step at 1,000 atoms); ``colour`` does nothing."""
    rng = np.random.default_rng(seed)
    lines = ["steps,atoms,cut,temp,skin,colour,rep,runtime"]
    for _ in range(n_configs):
        steps, atoms = int(rng.integers(1, 11)) * 50, int(rng.integers(2, 20)) * 100
        cut, temp, skin, colour = (round(float(rng.uniform(*bounds)), 3)
                                   for bounds in ((2.0, 3.2), (0.5, 3.0), (0.1, 0.5), (0.0, 1.0)))
        cache = 1 + 1.5 / (1 + np.exp(-(atoms - 1000) / 150))
        value = 0.1 + steps * atoms * cache * (cut ** 3 + 3 * temp ** 0.5 / skin) * 1e-6
        lines += [f"{steps},{atoms},{cut},{temp},{skin},{colour},{rep},{value * np.exp(rng.normal(0, noise)):.6f}"
                  for rep in range(reps)]
    return parse_runs_csv("\n".join(lines), target="runtime")


def test_follows_a_sum_of_costs_that_the_log_linear_model_cannot():
    table = melt_like_table()
    train, test = split_by_configuration(table.groups, 0.5, 0)
    scores = {learner: evaluate(table, learner=learner, train_rows=train, test_rows=test, time_share=None)["mape"]
              for learner in ("log-linear", "gaussian-process")}
    # Measured: 4.8 % vs 13.8 % (boosted trees 8.4 %).
    assert scores["gaussian-process"] < 0.7 * scores["log-linear"], scores


def test_served_artifact_answers_as_the_fitted_model(tmp_path):
    table = melt_like_table(n_configs=40, seed=3)
    model = RuntimeModel("gaussian-process", {"random_state": 0}).fit(table)
    save_application_model(model, tmp_path, application="app", metadata={"version": "v"})
    description = json.loads((tmp_path / "app" / "inputs.json").read_text())
    assert description["format"] == "hpcpredict-runtime-gaussian-process"
    unseen = {"steps": 50, "atoms": 300.0, "cut": 2.5, "temp": 1.0, "skin": 0.3, "colour": 0.5}
    rows = [table.rows[i] for i in range(0, len(table.y), 5)] + [unseen]
    for estimate in served_as_fitted(model, tmp_path, rows):
        assert estimate.low_s < estimate.runtime_s < estimate.high_s
        assert estimate.model_name == "runtime-gaussian-process/app/inputs"
    assert "through 40 configurations" in served_as_fitted(model, tmp_path, rows[:1])[0].explanation[0]


@pytest.mark.parametrize("change_arrays, message", [
    (lambda a: a.update(train=a["train"][:-1]), "shapes do not match"),
    (lambda a: a.update(length_scale=a["length_scale"][:-1]), "shapes do not match"),
    (lambda a: a.pop("alpha"), "gaussian-process arrays"),
    (lambda a: a.update(kernel=np.asarray([1.0])), "gaussian-process arrays"),
    (lambda a: a.update(alpha=np.full_like(a["alpha"], np.nan)), "finite"),
    (lambda a: a.update(length_scale=-a["length_scale"]), "positive"),
])
def test_corrupt_artifact_is_refused(tmp_path, change_arrays, message):
    model = RuntimeModel("gaussian-process", {"random_state": 0, "calibration_folds": 2})
    model.fit(melt_like_table(n_configs=30))
    save_application_model(model, tmp_path, application="app", metadata={})
    _rewrite(tmp_path, change_arrays)
    with pytest.raises(ModelArtifactError, match=message):
        ApplicationModels.load(tmp_path)


def test_outside_its_bounds_it_is_refused_and_the_learner_choice_skips_it():
    table = melt_like_table(n_configs=30)
    capped = {"max_configurations": 20}
    chosen, scores = select_learner(table, np.arange(len(table.y)),
                                    candidates={"log-linear": {}, "gaussian-process": capped})
    assert chosen == "log-linear" and np.isnan(scores["gaussian-process"]), scores
    with pytest.raises(LearnerNotApplicable, match="30 configurations"):
        GaussianProcessRuntime(**capped).fit(np.arange(60.0).reshape(-1, 1) + 1, np.ones(60),
                                            groups=np.arange(60) // 2)
    with pytest.raises(LearnerNotApplicable, match="10 configurations: .* at least 24"):
        GaussianProcessRuntime().fit(np.arange(20.0).reshape(-1, 1) + 1, np.ones(20), groups=np.arange(20) // 2)


def test_the_likelihood_search_does_not_stop_at_a_poor_optimum():
    """On the real LAMMPS sweep's split 1 (50 % training, the declared derived inputs), a search with
    one restart ended at a log marginal likelihood of 19.8 where other starts reach 64.5, and its
    predictions were half as good (7.1 % MAPE against 3.8 %). The served search must find what a
    search with many more starts finds."""
    path = DATA / "lammps_melt_quiet.csv"
    table = read_runs_csv(path, target="runtime_s", derived=declared_derived(path))
    train, _ = split_by_configuration(table.groups, 0.5, 1)

    def fitted(**params):
        return RuntimeModel("gaussian-process", dict(params, calibration_folds=0, random_state=1)).fit(table, train)

    served, thorough = fitted().estimator_, fitted(restarts=12).estimator_
    assert served.log_marginal_likelihood_ > thorough.log_marginal_likelihood_ - 1.0, \
        (served.log_marginal_likelihood_, thorough.log_marginal_likelihood_)
    # One restart ended at the poor optimum with the scikit-learn/SciPy of 2026-11; with the versions a fresh
    # setup installs on 2026-12-02 it reaches 64.51 too, so that witness is no longer asserted (the served
    # search's own check above is what the daemon relies on).
