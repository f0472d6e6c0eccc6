"""Cray XC samples: cname decoding, xtprocadmin/xtnodestat against the ground-truth nidmap."""
import csv
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import InvalidTopology, ParseError
from hpcpredict.topology.cray import (cname_to_nid, decode_cname, parse_xtnodestat,
                                      parse_xtprocadmin, placement_from_cnames,
                                      placement_from_xtprocadmin)
from hpcpredict.topology.sitemap import parse_site_map

CRAY = Path(__file__).resolve().parents[1] / "data" / "topology" / "cray"
NEG = CRAY.parent / "negative"


def truth():
    with open(CRAY / "nidmap.xc40-2groups.csv") as stream:
        return list(csv.DictReader(stream))


def test_xtprocadmin_matches_the_nidmap_ground_truth():
    nodes = parse_xtprocadmin((CRAY / "xtprocadmin.xc40-2groups.txt").read_text())
    rows = truth()
    assert len(nodes) == len(rows) == 762
    p = placement_from_xtprocadmin(nodes)
    assert p.kind == "dragonfly" and p.levels == ("aries", "chassis", "group")
    for row in rows:
        expected = (row["aries_router"], f"{row['cabinet']}c{row['chassis']}", row["group"])
        assert p.path(row["hostname"]) == expected
        assert p.path(row["cname"]) == expected
    by_nid = {n.nid: n for n in nodes}
    assert (by_nid[6].type, by_nid[6].status) == ("service", "down")
    assert by_nid[350].status == "down" and by_nid[652].status == "admindown"


def test_blade_chassis_group_of_one_cname():
    c = decode_cname("c3-0c2s15n3")
    assert (c.col, c.row, c.chassis, c.slot, c.node) == (3, 0, 2, 15, 3)
    assert (c.router, c.chassis_name, c.cabinet, str(c)) == ("c3-0c2s15a0", "c3-0c2", "c3-0", "c3-0c2s15n3")
    for bad in ("c0-0c3s0n0", "c0-0c0s16n0", "c0-0c0s0n4", "nid00001", "c0-0c0s0"):
        with pytest.raises(ParseError):
            decode_cname(bad)


def test_cori_nid_numbering_vectors():
    pairs = [line.split() for line in (CRAY / "nid-cname.cori-testvectors.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert len(pairs) == 10
    for nid, cname in pairs:
        assert cname_to_nid(cname, cabinets_per_row=12) == int(nid[3:])
    # Cori default groups: cabinets c0,c1 of row 0 -> g0; c10-2 -> row 2 * 6 + 5
    p = placement_from_cnames([(c, n) for n, c in pairs], cabinets_per_row=12)
    assert p.path("nid06676")[2] == "g17" and p.path("nid00000")[2] == "g0"


def test_theta_site_map_overrides_group_numbering():
    groups = parse_site_map((CRAY / "theta-cabinet-to-group.txt").read_text())
    assert groups["c0-1"] == "1" and groups["c11-0"] == "9"
    p = placement_from_cnames([("c0-1c0s0n0", None), ("c1-1c2s3n1", None), ("c2-0c0s0n0", None)],
                              group_map=groups)
    assert [p.path(n)[2] for n in ("c0-1c0s0n0", "c1-1c2s3n1", "c2-0c0s0n0")] == ["g1", "g1", "g2"]
    with pytest.raises(InvalidTopology, match="c13-0"):
        placement_from_cnames([("c13-0c0s0n0", None)], group_map=groups)


def test_quoted_piz_daint_excerpt():
    nodes = parse_xtprocadmin((CRAY / "xtprocadmin.piz-daint-excerpt.REAL-QUOTED.txt").read_text())
    assert [(n.nid, n.cname, n.type) for n in nodes] == [
        (1, "c0-0c0s0n1", "service"), (2, "c0-0c0s0n2", "service"),
        (4, "c0-0c0s1n0", "compute"), (5, "c0-0c0s1n1", "compute")]


def test_xtnodestat_grid_agrees_with_xtprocadmin():
    slots = parse_xtnodestat((CRAY / "xtnodestat.xc40-2groups.txt").read_text())
    nodes = parse_xtprocadmin((CRAY / "xtprocadmin.xc40-2groups.txt").read_text())
    assert {s.cname for s in slots} == {n.cname for n in nodes}
    state = {s.cname: s.state for s in slots}
    counts = {ch: sum(1 for s in slots if s.state == ch) for ch in "-abcd"}
    assert counts == {"-": 339, "a": 184, "b": 128, "c": 92, "d": 8}   # legend + job table
    by_nid = {n.nid: n.cname for n in nodes}
    assert state[by_nid[350]] == "X" and state[by_nid[6]] == "Y"
    assert {state[by_nid[n]] for n in range(652, 656)} == {"Z"}


@pytest.mark.parametrize("name, parser, line, part", [
    ("xtprocadmin.truncated.txt", parse_xtprocadmin, 301, "   303    0x12f c1-0c1s11"),
    ("xtprocadmin.bad-cname.txt", parse_xtprocadmin, 340, "c1-0c7s5n2"),
    ("xtnodestat.truncated.txt", parse_xtnodestat, 9, ""),
])
def test_truncated_or_garbled_cray_listings(name, parser, line, part):
    with pytest.raises(ParseError) as info:
        parser((NEG / name).read_text(), name)
    assert info.value.line == line and str(info.value).startswith(f"{name}:{line}")
    assert info.value.part == part


def test_xtprocadmin_needs_header_and_unique_nids():
    with pytest.raises(ParseError, match="header"):
        parse_xtprocadmin("     1      0x1  c0-0c0s0n1  service        up       batch\n")
    text = (CRAY / "xtprocadmin.piz-daint-excerpt.REAL-QUOTED.txt").read_text()
    with pytest.raises(ParseError, match="NID 5 listed twice"):
        parse_xtprocadmin(text + text.splitlines()[-1] + "\n")
