"""topology/ is the lowest layer: it must import without pulling in the daemon."""
import subprocess
import sys

import pytest

from hpcpredict.daemon import errors as daemon_errors
from hpcpredict.topology import errors as topology_errors

MODULES = ("cray", "errors", "hostlist", "ibnetdiscover", "ibtools", "infiniband", "mapping", "placement",
           "sitemap", "slurm_tree")


@pytest.mark.parametrize("module", MODULES)
def test_topology_module_imports_no_daemon_module(module):
    code = (f"import sys, hpcpredict.topology.{module}; "
            "print(sorted(m for m in sys.modules if m.startswith('hpcpredict.daemon')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_one_hierarchy_the_daemon_reexports_the_same_classes():
    for name in ("HpcPredictError", "ParseError", "InvalidRequest", "InvalidTopology", "UnknownNode"):
        assert getattr(daemon_errors, name) is getattr(topology_errors, name)
    for name in ("ConfigError", "CommandError", "ModelArtifactError", "StoreError"):
        assert issubclass(getattr(daemon_errors, name), topology_errors.HpcPredictError)
