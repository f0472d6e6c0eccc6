"""The runnable examples in the comm modules' docstrings stay true."""
import doctest
import importlib

import pytest

MODULES = ["patterns", "features", "records", "fabric", "simulate", "metrics", "dataset",
           "baselines", "commbench_ingest"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.daemon.comm.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
