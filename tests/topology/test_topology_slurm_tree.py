"""topology.conf and REAL-slurmctld `scontrol show topology` samples."""
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import InvalidTopology, ParseError
from hpcpredict.topology.slurm_tree import (parse_scontrol_topology, parse_topology_conf,
                                            placement_from_tree)

SLURM = Path(__file__).resolve().parents[1] / "data" / "topology" / "slurm"
NEG = SLURM.parent / "negative"


def conf(name):
    return placement_from_tree(parse_topology_conf((SLURM / name).read_text(), name))


def scontrol(name):
    return placement_from_tree(parse_scontrol_topology((SLURM / name).read_text(), name))


def test_fattree_conf_and_scontrol_agree():
    p = conf("topology.conf.fattree")
    assert p.kind == "tree" and p.levels == ("level1", "level2")
    for i in range(1, 65):
        assert p.path(f"node{i:03d}") == (f"ib-leaf0{(i - 1) // 16 + 1}", "ib-spine[01-02]")
    assert dict(scontrol("scontrol-show-topology.fattree.txt").paths) == dict(p.paths)


def test_per_name_scontrol_session_is_partial_but_right():
    p = scontrol("scontrol-show-topology.fattree.per-name.txt")
    assert set(p.paths) == {f"node{i:03d}" for i in range(17, 33)}
    assert p.path("node017") == ("ib-leaf02", "ib-spine[01-02]")
    assert any(":1: not a switch line" in w for w in p.warnings)
    assert any("'ib-leaf01'" in w and "partial" in w for w in p.warnings)


def test_edgecases_lowercase_keys_comments_two_roots_unlisted_nodes():
    p = conf("topology.conf.edgecases")
    assert p.path("node010") == ("leafA", "spineX")
    assert p.path("node011") == ("leafB", "spineX")
    assert p.path("node030") == ("leafC", "spineY")
    # slurmctld-log.edgecases.txt: switches lack access to node[009,031-064]
    assert len(p) == 64 - 35 and "node009" not in p and "node031" not in p
    assert dict(scontrol("scontrol-show-topology.edgecases.txt").paths) == dict(p.paths)


def test_xc40_dragonfly_as_tree_four_levels():
    p = conf("topology.conf.xc40-2groups")
    assert p.levels == ("level1", "level2", "level3", "level4")
    assert p.path("nid00008") == ("c0-0c0s2", "c0-0c0", "g0", "xc-top")
    assert p.path("nid00767") == ("c3-0c2s15", "c3-0c2", "g1", "xc-top")
    assert len(p) == 376 + 380    # slurm-nodes.conf: nid[00008-00383,00388-00767]
    assert dict(scontrol("scontrol-show-topology.xc40-2groups.txt").paths) == dict(p.paths)


def test_shallow_subtree_is_padded_with_its_top():
    text = "SwitchName=l1 Nodes=a[1-2]\nSwitchName=l2 Nodes=b1\nSwitchName=mid Switches=l1\nSwitchName=top Switches=mid\n"
    p = placement_from_tree(parse_topology_conf(text))
    assert p.path("a1") == ("l1", "mid", "top") and p.path("b1") == ("l2", "l2", "l2")


@pytest.mark.parametrize("name, error, message", [
    ("topology.conf.node-under-two-leaves", InvalidTopology,
     r"topology.conf.node-under-two-leaves:3: node node016 is listed under two switches, ib-leaf01 \(line 2\)"),
    ("topology.conf.garbled", ParseError, r"topology.conf.garbled:3: expected Key=Value"),
    ("topology.conf.bad-hostlist", ParseError, r"topology.conf.bad-hostlist:3: bad hostlist"),
    ("topology.conf.undefined-child", InvalidTopology, r"undefined-child:3: .*'ib-leaf02', which is not defined"),
    ("topology.conf.cycle", InvalidTopology, r"cycle"),
])
def test_bad_topology_conf(name, error, message):
    with pytest.raises(error, match=message):
        placement_from_tree(parse_topology_conf((NEG / name).read_text(), name))


def test_other_bad_lines():
    with pytest.raises(ParseError, match="no SwitchName"):
        parse_topology_conf("Nodes=n1\n")
    with pytest.raises(ParseError, match="no SwitchName lines"):
        parse_topology_conf("# nothing\n")
    with pytest.raises(ParseError, match="defined again"):
        parse_topology_conf("SwitchName=s Nodes=a1\nSwitchName=s Nodes=a2\n")


@pytest.mark.parametrize("expression", ["@rack1", "node[1-3]!node2", "a&b", "node[5-1]"])
def test_clustershell_only_syntax_is_not_a_slurm_hostlist(expression):
    with pytest.raises(ParseError, match=r"t:1: bad hostlist"):
        parse_topology_conf(f"SwitchName=s Nodes={expression}\n", "t")
