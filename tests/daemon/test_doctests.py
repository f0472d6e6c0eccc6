"""The runnable examples in the daemon's own modules' docstrings."""
import doctest
import importlib

import pytest

MODULES = ["faults", "store.journal", "config", "plugins", "remote_wire", "sources", "suggestion", "cli.report",
           "policy.controller", "policy.decision", "policy.limits", "policy.scope", "policy.slurm_defaults", "policy.allocation",
           "cli.job_limits", "listeners.line_json", "commands", "forecast.queue", "cli.when", "refresher",
           "forecast.recent", "forecast.calibration"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hpcpredict.daemon.{name}")
    failures, tried = doctest.testmod(module)
    assert tried > 0 and failures == 0
