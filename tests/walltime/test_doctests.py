"""The runnable examples in the walltime modules' docstrings (served form and lab)."""
import doctest
import importlib

import pytest

MODULES = ["hpcpredict.daemon.history." + name for name in ("features", "predictors", "persist")] + [
    "hpcpredict.daemon.lab.history." + name
    for name in ("swf", "sacct", "traces", "evaluation", "training", "accounting", "pyslurm_source")]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    failures, tried = doctest.testmod(module)
    assert tried > 0 and failures == 0
