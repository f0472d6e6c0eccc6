"""Feature values against hand-computed answers (seed 004, Tables 1-4)."""
import numpy as np
import pytest

from hpcpredict.daemon.comm.features import (
    class_a, class_b, class_c, class_c_model_candidates, class_c_names, hops_max, phase_features)
from hpcpredict.daemon.comm.patterns import build_pattern
from hpcpredict.topology.mapping import map_ranks
from hpcpredict.topology.placement import Placement

# 8 ranks, block mapping 2 per node on nodes a, b (switch s1), c (s2) in rack r1; d (s3) in r2.
MESSAGES = (
    (0, 1, 10),     # intra-node (a)
    (0, 2, 20),     # a -> b: same switch s1
    (2, 4, 40),     # b -> c: s1 -> s2, same rack r1
    (5, 6, 80),     # c -> d: r1 -> r2
    (7, 0, 160),    # d -> a: r2 -> r1
    (6, 7, 5),      # intra-node (d)
)
IB = Placement("infiniband", ("switch", "rack"),
               {"a": ("s1", "r1"), "b": ("s1", "r1"), "c": ("s2", "r1"), "d": ("s3", "r2"),
                "e": ("s4", "r2")})


def _phase():
    return build_pattern("explicit", 8, 0, messages=MESSAGES), map_ranks(4, 8, "block").astype(np.int64)


def test_class_a():
    m, rn = _phase()
    assert class_a(m, rn) == {"n": 4, "ppn": 2, "l": 160, "PD": 160, "PM": 2}


def test_class_b_intra_and_inter_node():
    m, rn = _phase()
    f = class_b(m, rn)
    # node data out: a 20, b 40, c 80, d 160; intra-node: a 10, d 5
    assert (f["ND_min"], f["ND_avg"], f["ND_max"]) == (20, 75, 160)
    assert (f["NM_min"], f["NM_avg"], f["NM_max"]) == (1, 1, 1)
    assert (f["iND_min"], f["iND_avg"], f["iND_max"]) == (0, 3.75, 10)
    assert (f["iNM_min"], f["iNM_avg"], f["iNM_max"]) == (0, 0.5, 1)
    assert (f["TD"], f["TM"]) == (300, 4)


def test_class_c_infiniband_switch_and_rack_levels():
    m, rn = _phase()
    f = class_c(m, rn, IB.encode(["a", "b", "c", "d"]), IB.kind, IB.levels)
    assert (f["sw"], f["r"], f["n/sw"], f["sw/r"]) == (3, 2, pytest.approx(4 / 3), 1.5)
    assert (f["SD_min"], f["SD_avg"], f["SD_max"]) == (40, pytest.approx(280 / 3), 160)
    assert (f["SM_min"], f["SM_avg"], f["SM_max"]) == (1, 1, 1)
    # intra-switch: only a -> b (20 B) on s1; intra-node traffic does not count
    assert (f["iSD_min"], f["iSD_avg"], f["iSD_max"]) == (0, pytest.approx(20 / 3), 20)
    assert (f["iSM_min"], f["iSM_max"]) == (0, 1)
    assert (f["RD_min"], f["RD_avg"], f["RD_max"]) == (80, 120, 160)
    assert (f["iRD_min"], f["iRD_avg"], f["iRD_max"]) == (0, 20, 40)
    assert list(f) == list(class_c_names("infiniband", ("switch", "rack")))


def test_class_c_dragonfly_levels_and_group_to_group():
    place = Placement("dragonfly", ("aries", "chassis", "group"),
                      {"a": ("x1", "c1", "g1"), "b": ("x1", "c1", "g1"), "c": ("x2", "c1", "g1"),
                       "d": ("x3", "c2", "g1"), "e": ("x4", "c3", "g2")})
    m = build_pattern("explicit", 5, 0, messages=((0, 1, 1), (0, 2, 2), (0, 3, 4), (3, 4, 8),
                                                 (4, 0, 16), (4, 3, 32)))
    rn = np.arange(5)
    f = class_c(m, rn, place.encode(list("abcde")), place.kind, place.levels)
    assert (f["c"], f["g"], f["c/g"]) == (3, 2, 1.5)
    assert "sw" not in f and "a" not in f                      # Table 4 has no Aries count
    # Aries x1 (a,b) sends 2+4 out, 1 inside; x2 nothing; x3 (d) 8; x4 (e) 48
    assert (f["AD_min"], f["AD_max"]) == (0, 48) and f["AD_avg"] == pytest.approx(62 / 4)
    assert (f["iAD_max"], f["iAM_max"]) == (1, 1)
    assert (f["iCD_max"], f["iCM_max"]) == (2, 1)              # a -> c: two Aries of chassis c1
    assert (f["iGD_max"], f["GD_max"], f["GD_min"]) == (4, 48, 8)
    assert (f["GGD_max"], f["GGM_max"]) == (48, 2)


def test_generic_tree_names_and_values():
    place = Placement("tree", ("l1", "l2", "l3"), {"a": ("s1", "p1", "t"), "b": ("s2", "p1", "t")})
    m = build_pattern("explicit", 2, 0, messages=((0, 1, 7), (1, 0, 3)))
    f = class_c(m, np.arange(2), place.encode(["a", "b"]), place.kind, place.levels)
    assert (f["L1"], f["L2"], f["n/L1"], f["L1/L2"]) == (2, 1, 1, 2)
    assert (f["L1D_max"], f["iL1D_max"], f["iL2D_max"], f["L2D_max"]) == (7, 0, 10, 0)


def test_halo_features_with_block_mapping():
    # halo3d on 8 ranks (2x2x2), 2 ranks per node: ranks (0,1) share a node -> z-faces intra-node
    m = build_pattern("halo3d", 8, 100)
    rn = map_ranks(4, 8, "block").astype(np.int64)
    f = class_b(m, rn)
    assert (f["iND_max"], f["ND_max"], f["TD"], f["TM"]) == (200, 400, 1600, 16)
    g = class_b(m, map_ranks(4, 8, "cyclic").astype(np.int64))
    assert g["iND_max"] == 200 and g["TD"] == 1600               # 0<->4 is an x-face: still intra


def test_hops_and_phase_features():
    m, rn = _phase()
    anc = IB.encode(["a", "b", "c", "d"])
    # rank 0: intra-node (0) + same switch (2) = 2; rank 2: same rack (4); ranks 5, 7: 6
    assert hops_max(m, rn, anc) == 6
    row = phase_features(m, rn, ["a", "b", "c", "d"], IB)
    assert row["hops_max"] == 6 and row["SD_max"] == 160 and row["n"] == 4
    assert "SD_max" not in phase_features(m, rn, None, None)
    # relative class C inputs: level quantities over the busiest node's (ND_max 160, NM_max 1)
    assert row["SD_avg_rel"] == pytest.approx(280 / 3 / 160) and row["iRD_max_rel"] == 40 / 160
    assert row["RM_max_rel"] == 1 and row["TD_rel"] == 300 / 160 and "ND_max_rel" not in row
    assert "SD_max_rel" not in phase_features(m, rn, None, None)


def test_class_c_model_candidates_are_relative():
    m, rn = _phase()
    row = phase_features(m, rn, ["a", "b", "c", "d"], IB)
    candidates = class_c_model_candidates(tuple(row))
    assert {"ND_max", "NM_max", "l", "PM", "sw", "r", "n/sw", "sw/r", "SD_max_rel"} <= set(candidates)
    # absolute volumes other than the node bottleneck, and the baselines' hops, are left out
    assert not {"SD_max", "PD", "TD", "iND_max", "hops_max"} & set(candidates)
    # a node with no off-node traffic divides by 1, not 0
    solo = phase_features(build_pattern("explicit", 2, 0, messages=((0, 1, 8),)),
                          np.zeros(2, dtype=np.int64), ["a"], IB)
    assert solo["iND_max_rel"] == 8 and solo["ND_max"] == 0


def test_large_phase_is_vectorised():
    m = build_pattern("lulesh1", 4096, 10_000)
    rn = map_ranks(256, 4096, "block").astype(np.int64)
    anc = np.stack([np.arange(256) // 16, np.arange(256) // 64], axis=1)
    f = class_c(m, rn, anc, "infiniband", ("switch", "rack"))
    assert f["sw"] == 16 and f["r"] == 4
    # conservation: data leaving the switches = inter-switch traffic, counted once per message
    b = class_b(m, rn)
    assert f["SD_avg"] * 16 + f["iSD_avg"] * 16 == pytest.approx(b["TD"])
