"""The servicer's cheap hostlist count is an upper bound of what ClusterShell would expand."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from hpcpredict.daemon.errors import ParseError
from hpcpredict.topology.hostlist import count as hostlist_count, expand
from tests.fuzz.targets import HOSTLIST, _hostlist_size_ok


@settings(max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(HOSTLIST.filter(_hostlist_size_ok))
def test_count_bounds_the_expansion(expression):
    try:
        names = expand(expression)
    except ParseError:
        return
    assert hostlist_count(expression.strip()) >= len(set(names))


def test_count_without_expanding():
    assert hostlist_count("n[001-016,020],login1") == 18
    assert hostlist_count("rack[1-2]-n[01-10]") == 20
    assert hostlist_count("n[0-99999999999999999999]") >= 10 ** 15  # no int() of a huge string, no expansion
    assert hostlist_count("n[" + "1," * 10000 + "2]") == 10001
