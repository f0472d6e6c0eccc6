"""The runnable examples in the walltime modules' docstrings."""
import doctest
import importlib

import pytest

MODULES = ["swf", "sacct", "traces", "features", "predictors", "evaluate", "persist", "accounting", "pyslurm_source"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.daemon.history.{name}")
    failures, tried = doctest.testmod(module)
    assert tried > 0 and failures == 0
