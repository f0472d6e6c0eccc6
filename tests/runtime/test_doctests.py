"""The runnable examples in the runtime package's docstrings stay true."""
import doctest
import importlib

import pytest

MODULES = ["values", "report", "inputs", "dataset", "metrics", "reduction", "encoding", "conformal", "trees",
           "model", "derived", "linear", "ann", "transfer", "active", "evaluation", "service", "training",
           "compiled_ann", "selection", "startup_steps"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.daemon.runtime.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
