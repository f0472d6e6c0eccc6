"""The runnable examples in every topology module's docstring."""
import doctest
import importlib

import pytest

MODULES = ["placement", "mapping", "hostlist", "sitemap", "ibnetdiscover", "ibtools",
           "infiniband", "cray", "slurm_tree"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.topology.{name}")
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
