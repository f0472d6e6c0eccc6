"""Rank -> node mapping against hand-worked Slurm layouts and layout invariants."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hpcpredict.daemon.errors import InvalidRequest
from hpcpredict.topology.mapping import map_ranks, parse_tasks_per_node


def test_parse_tasks_per_node():
    assert parse_tasks_per_node("4,2,1(x2)") == [4, 2, 1, 1]
    assert parse_tasks_per_node("2(x3)") == [2, 2, 2]
    for bad in ("", "4,,2", "4(x)", "a", "4(x2"):
        with pytest.raises(InvalidRequest, match="tasks_per_node"):
            parse_tasks_per_node(bad)


@pytest.mark.parametrize("dist, counts, expected", [
    # -N3 -n7: Slurm's even spread is 3,2,2
    ("block", None, [0, 0, 0, 1, 1, 2, 2]),
    ("cyclic", None, [0, 1, 2, 0, 1, 2, 0]),
    ("block", "4,2,1", [0, 0, 0, 0, 1, 1, 2]),
    # cyclic respects counts: pass 0 -> 0,1,2; pass 1 -> 0,1; passes 2,3 -> node 0 only
    ("cyclic", "4,2,1", [0, 1, 2, 0, 1, 0, 0]),
    # plane=2: blocks of 2 dealt round-robin; node 2 takes 1, then node 0 its last 2
    ("plane=2", "4,2,1", [0, 0, 1, 1, 2, 0, 0]),
    ("plane=3", None, [0, 0, 0, 1, 1, 1, 2]),
    ("block:cyclic,Pack", None, [0, 0, 0, 1, 1, 2, 2]),
    ("CYCLIC:block", None, [0, 1, 2, 0, 1, 2, 0]),
])
def test_known_layouts(dist, counts, expected):
    ranks = map_ranks(3, 7, dist, tasks_per_node=counts)
    assert ranks.dtype == np.int32
    assert ranks.tolist() == expected


def test_arbitrary_uses_hostfile_order_and_checks_it():
    assert map_ranks(3, 4, "arbitrary", rank_nodes=[2, 0, 2, 1]).tolist() == [2, 0, 2, 1]
    with pytest.raises(InvalidRequest, match="rank_nodes"):
        map_ranks(3, 4, "arbitrary")
    with pytest.raises(InvalidRequest, match="rank_nodes"):
        map_ranks(3, 4, "arbitrary", rank_nodes=[0, 1, 5, 1])
    with pytest.raises(InvalidRequest, match="rank_nodes"):
        map_ranks(3, 4, "arbitrary", tasks_per_node="2,1,1", rank_nodes=[0, 1, 2, 2])


@pytest.mark.parametrize("kwargs, field", [
    (dict(node_count=2, ntasks=3, tasks_per_node="2,2"), "tasks_per_node"),     # sum != ntasks
    (dict(node_count=3, ntasks=4, tasks_per_node="2,2"), "tasks_per_node"),     # length
    (dict(node_count=4, ntasks=3), "ntasks"),                                   # fewer tasks than nodes
    (dict(node_count=2, ntasks=9, ntasks_per_node=4), "ntasks"),
    (dict(node_count=2, ntasks=4, tasks_per_node="3,1", ntasks_per_node=2), "tasks_per_node"),
    (dict(node_count=2, ntasks=4, distribution="spread"), "distribution"),
    (dict(node_count=2, ntasks=4, distribution="plane=0"), "distribution"),
    (dict(node_count=0, ntasks=4), "node_count"),
    (dict(node_count=2, ntasks=0), "ntasks"),
])
def test_impossible_requests(kwargs, field):
    with pytest.raises(InvalidRequest) as info:
        map_ranks(**kwargs)
    assert info.value.field == field


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=12), st.sampled_from(["block", "cyclic", "plane=1", "plane=3"]))
def test_layout_honours_per_node_counts(counts, dist):
    ntasks = sum(counts)
    if ntasks == 0:
        return
    ranks = map_ranks(len(counts), ntasks, dist, tasks_per_node=counts)
    assert np.bincount(ranks, minlength=len(counts)).tolist() == counts
    if dist == "block":
        assert np.all(np.diff(ranks) >= 0)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 20), st.integers(0, 60))
def test_even_spread_without_counts(nodes, extra):
    ntasks = nodes + extra
    for dist in ("block", "cyclic"):
        per_node = np.bincount(map_ranks(nodes, ntasks, dist), minlength=nodes)
        assert per_node.max() - per_node.min() <= 1 and per_node.sum() == ntasks
        assert np.all(np.diff(per_node) <= 0)  # the first ntasks % nodes nodes get the extra
