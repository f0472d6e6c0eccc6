"""benchmarks/runtime/derived_check.py judges a derived input by the folds and fits ``auto`` uses."""
import numpy as np
import pytest

from benchmarks.runtime.derived_check import out_of_fold_predictions
from benchmarks.runtime.residuals import DATA
from hpcpredict.daemon.runtime.dataset import read_runs_csv
from hpcpredict.daemon.runtime.evaluation import split_by_configuration, usable_inputs
from hpcpredict.daemon.runtime.metrics import rank_accuracy
from hpcpredict.daemon.runtime.selection import CANDIDATES, out_of_fold_errors


@pytest.mark.parametrize("learner", ["log-linear", "boosted-trees"])
def test_out_of_fold_predictions_are_the_ones_selection_scores(learner):
    """Its predictions' percentage errors are ``selection.out_of_fold_errors`` run for run (same
    folds, same fits), so the rank accuracy it adds describes what the learner choice measured."""
    table = read_runs_csv(DATA / "nwchem_water.csv", target="runtime_s")
    train, _ = split_by_configuration(table.groups, 0.5, 1)
    inputs, _, _ = usable_inputs(table, train, time_share=None)
    predicted = out_of_fold_predictions(table, train, learner, inputs=inputs, seed=1)
    errors = out_of_fold_errors(table, train, learner, CANDIDATES[learner], inputs=inputs, seed=1)
    np.testing.assert_allclose(np.abs(predicted - table.y[train]) / table.y[train], errors, rtol=1e-9)
    assert 0.5 < rank_accuracy(table.y[train], predicted) <= 1.0
