"""The runnable examples in the runtime family's docstrings (served form and lab) stay true."""
import doctest
import importlib

import pytest

MODULES = ["runtime.values", "runtime.report", "runtime.inputs", "runtime.encoding", "runtime.conformal",
           "runtime.derived", "runtime.compiled_ann", "runtime.served",
           "lab.runtime.dataset", "lab.runtime.accuracy", "lab.runtime.reduction", "lab.runtime.trees",
           "lab.runtime.model", "lab.runtime.learners", "lab.runtime.linear", "lab.runtime.ann",
           "lab.runtime.transfer", "lab.runtime.active", "lab.runtime.evaluation", "lab.runtime.training",
           "lab.runtime.selection", "lab.runtime.startup_steps"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.daemon.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
