"""The runnable examples in the comm modules' docstrings stay true."""
import doctest
import importlib

import pytest

MODULES = ["comm.patterns", "comm.features", "comm.records", "lab.comm.fabric", "lab.comm.simulate",
           "lab.comm.accuracy", "lab.comm.dataset", "lab.comm.baselines", "lab.comm.commbench_ingest"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.daemon.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
