"""Placement model: encode ids, unknown nodes, JSON round trip, atomic save, bad files."""
import json
from pathlib import Path

import numpy as np
import pytest

from hpcpredict.daemon.errors import InvalidTopology, UnknownNode
from hpcpredict.topology.placement import Placement

NEG = Path(__file__).resolve().parents[1] / "data" / "topology" / "negative"


def small() -> Placement:
    return Placement("tree", ("switch", "rack"),
                     {"n1": ("s1", "r1"), "n2": ("s1", "r1"), "n3": ("s2", "r1"), "n4": ("s3", "r2")},
                     warnings=("x:1: something skipped",), source="unit")


def test_encode_gives_equal_ids_exactly_for_shared_ancestors():
    p = small()
    ids = p.encode(["n4", "n1", "n2", "n3"])
    assert ids.dtype == np.int32 and ids.shape == (4, 2)
    same_switch = ids[:, None, 0] == ids[None, :, 0]
    same_rack = ids[:, None, 1] == ids[None, :, 1]
    order = ["n4", "n1", "n2", "n3"]
    for i, a in enumerate(order):
        for j, b in enumerate(order):
            assert same_switch[i, j] == (p.path(a)[0] == p.path(b)[0])
            assert same_rack[i, j] == (p.path(a)[1] == p.path(b)[1])
    assert p.ancestor_name(0, ids[0, 0]) == "s3" and p.level_size(1) == 2


def test_encode_empty_and_ids_stable_across_reload(tmp_path):
    p = small()
    assert p.encode([]).shape == (0, 2)
    p.save(tmp_path / "t.json")
    again = Placement.load(tmp_path / "t.json")
    assert again == p
    assert np.array_equal(again.encode(["n1", "n3", "n4"]), p.encode(["n1", "n3", "n4"]))
    assert again.warnings == p.warnings and again.source == "unit"


def test_unknown_nodes_are_named():
    p = small()
    with pytest.raises(UnknownNode, match="n9"):
        p.path("n9")
    with pytest.raises(UnknownNode) as info:
        p.encode(["n1", "ghost1", "ghost2"])
    assert "ghost1" in str(info.value) and "ghost2" in str(info.value) and "2 node(s)" in str(info.value)


def test_json_shape_is_the_documented_interface():
    d = small().to_dict()
    assert d["kind"] == "tree" and d["levels"] == ["switch", "rack"]
    assert d["nodes"]["n3"] == {"path": ["s2", "r1"]}
    assert d["warnings"] == ["x:1: something skipped"]
    json.dumps(d)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    target = tmp_path / "topology.json"
    target.write_text("old")
    small().save(target)
    assert json.loads(target.read_text())["kind"] == "tree"
    assert [f.name for f in tmp_path.iterdir()] == ["topology.json"]


@pytest.mark.parametrize("name, message", [
    ("placement.truncated.json", "not valid placement JSON"),
    ("placement.wrong-depth.json", "2 ancestors"),
])
def test_bad_placement_files_give_clear_errors(name, message):
    with pytest.raises(InvalidTopology, match=message) as info:
        Placement.load(NEG / name)
    assert name in str(info.value)


def test_missing_file_and_bad_shapes(tmp_path):
    with pytest.raises(InvalidTopology, match="no such topology file"):
        Placement.load(tmp_path / "absent.json")
    with pytest.raises(InvalidTopology, match="'nodes'"):
        Placement.from_dict({"kind": "tree", "levels": ["a"]})
    with pytest.raises(InvalidTopology, match="kind"):
        Placement("mesh", ("a",), {"n": ("x",)})
