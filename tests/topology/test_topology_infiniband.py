"""InfiniBand samples (REAL-ibsim captures) against the fabric's known layout."""
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import InvalidTopology, ParseError
from hpcpredict.topology.ibnetdiscover import (apply_node_name_map, parse_ibnetdiscover,
                                               parse_node_name_map)
from hpcpredict.topology.ibtools import parse_ib_listing, parse_ibstat
from hpcpredict.topology.infiniband import hostname_of, placement_from_fabric
from hpcpredict.topology.sitemap import parse_site_map

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
FAT = DATA / "infiniband" / "fattree"
EDGE = DATA / "infiniband" / "hdr-edge"
IBNETDISCOVER = shutil.which("ibnetdiscover") or "/usr/sbin/ibnetdiscover"

LEAF_A, LEAF_B = "0xb8cef60300aa0101", "0xb8cef60300aa0201"   # the two unmanaged leaves
SPINE = "MF0;hdr-spine01:MQM8700/U1"


def place(path: Path, **kw):
    return placement_from_fabric(parse_ibnetdiscover(path.read_text(), path.name), **kw)


def fattree_expected(leaf_name=lambda k: f"MF0;ib-leaf0{k}:MSB7800/U1"):
    # README: leaf k hosts node(16(k-1)+1)..node(16k)
    return {f"node{i:03d}": leaf_name((i - 1) // 16 + 1) for i in range(1, 65)}


@pytest.mark.parametrize("name", ["ibnetdiscover.txt", "ibnetdiscover.from-node001.txt",
                                  "ibnetdiscover-g.txt", "ibnetdiscover-m.txt", "ibnetdiscover-p.txt"])
def test_fattree_every_format_places_hosts_under_their_leaf(name):
    p = place(FAT / name)
    assert p.kind == "infiniband" and p.levels == ("switch", "pod")
    assert {n: p.path(n)[0] for n in p.paths} == fattree_expected()
    # both spines serve every leaf: one pod named after the two spines
    assert {path[1] for path in p.paths.values()} == {"MF0;ib-spine[01-02]:MSB7800/U1"}
    assert p.warnings == ()


def test_node_name_map_capture_and_applying_the_map_agree():
    captured = place(FAT / "ibnetdiscover-node-name-map.txt")
    assert {n: p[0] for n, p in captured.paths.items()} == fattree_expected(lambda k: f"ib-leaf0{k} rack0{k}")
    assert captured.path("node040") == ("ib-leaf03 rack03", "ib-spine[01-02]")
    mapping = parse_node_name_map((FAT / "node-name-map").read_text())
    assert mapping[0x7cfe900300a1b101] == "ib-spine01"
    applied = placement_from_fabric(apply_node_name_map(
        parse_ibnetdiscover((FAT / "ibnetdiscover.txt").read_text()), mapping))
    assert dict(applied.paths) == dict(captured.paths)


def test_site_map_gives_racks_and_must_cover_every_leaf():
    site = parse_site_map("\n".join(f"MF0;ib-leaf0{k}:MSB7800/U1  rack{k}" for k in range(1, 5)))
    p = place(FAT / "ibnetdiscover.txt", site_map=site)
    assert p.levels == ("switch", "rack") and p.path("node033") == ("MF0;ib-leaf03:MSB7800/U1", "rack3")
    del site["MF0;ib-leaf02:MSB7800/U1"]
    with pytest.raises(InvalidTopology, match="ib-leaf02"):
        place(FAT / "ibnetdiscover.txt", site_map=site)


@pytest.mark.parametrize("name", ["ibnetdiscover.txt", "ibnetdiscover-g.txt", "ibnetdiscover-p.txt"])
def test_hdr_edge_cases(name):
    p = place(EDGE / name)
    # unmanaged leaves share a description -> named by GUID; the spine by its description
    assert p.path("cpu01") == (LEAF_B, SPINE)            # EDR link in an HDR fabric
    for host in ("gpu01", "gpu02", "gpu03", "gpu04", "storage01"):
        assert p.path(host) == (LEAF_A, SPINE)           # first rail / first port
    assert set(p.paths) == {"cpu01", "gpu01", "gpu02", "gpu03", "gpu04", "storage01"}
    text = "\n".join(p.warnings)
    assert "carries no hostname" in text and "MT4123 ConnectX6" in text
    assert not any(n.startswith("MT4123") for n in p.paths)
    multi = [w for w in p.warnings if "attached to 2 leaf switches" in w]
    assert len(multi) == 5 and all(LEAF_A in w and LEAF_B in w for w in multi)
    storage = next(w for w in multi if "storage01" in w)
    assert "port 1" in storage and "port 2" in storage      # dual-port CA, one CA GUID
    assert all(w.startswith(f"{name}:") and w.split(":")[1].isdigit() for w in p.warnings)


def test_hdr_edge_guid_with_leading_zero_nibble_is_one_node():
    fabric = parse_ibnetdiscover((EDGE / "ibnetdiscover.txt").read_text())
    assert 0x0c42a10300ee0100 in fabric.nodes      # "H-0c42..." and "caguid=0xc42..." agree
    assert len(fabric.nodes) == 3 + 11 and len(fabric.links) == 12 + 8


@pytest.mark.skipif(not Path(IBNETDISCOVER).exists(), reason="needs Debian infiniband-diags")
@pytest.mark.parametrize("cache, option, expected_hosts", [
    (FAT / "fattree.ibnd-cache", [], 64),
    (FAT / "fattree.ibnd-cache", ["-p"], 64),
    (EDGE / "hdr-edge.ibnd-cache", [], 6),
    (EDGE / "hdr-edge.ibnd-cache", ["-g"], 6),
])
def test_fresh_output_of_the_real_tool(cache, option, expected_hosts):
    run = subprocess.run([IBNETDISCOVER, "--load-cache", str(cache), *option],
                         capture_output=True, text=True, timeout=30, check=True)
    fresh = placement_from_fabric(parse_ibnetdiscover(run.stdout, "fresh"))
    assert len(fresh) == expected_hosts
    saved = {"fattree.ibnd-cache": FAT / ("ibnetdiscover-p.txt" if option else "ibnetdiscover.txt"),
             "hdr-edge.ibnd-cache": EDGE / "ibnetdiscover.txt"}[cache.name]
    assert dict(fresh.paths) == dict(place(saved).paths)


def test_hostname_rule():
    assert hostname_of("gpu01 mlx5_1") == "gpu01"
    assert hostname_of("node001 HCA-1") == "node001"
    assert hostname_of("MT4123 ConnectX6   Mellanox Technologies") is None
    assert hostname_of("") is None and hostname_of("nod@64 HCA-1") is None


def test_truncated_capture_warns_per_missing_record_and_line():
    p = place(DATA / "negative" / "ibnetdiscover.truncated.txt")
    assert any("ibnetdiscover.truncated.txt:451: unrecognised line" in w for w in p.warnings)
    dangling = [w for w in p.warnings if "no record of its own (truncated file?)" in w]
    assert len(dangling) == 64 - len(p)                  # every unplaced host is reported
    assert p.path("node020") == ("MF0;ib-leaf02:MSB7800/U1", "MF0;ib-spine[01-02]:MSB7800/U1")


def test_capture_cut_before_any_host_is_an_error():
    head = "\n".join((FAT / "ibnetdiscover.txt").read_text().splitlines()[:120])
    with pytest.raises(InvalidTopology, match=r"no host .*\(truncated file\?\)"):
        placement_from_fabric(parse_ibnetdiscover(head, "head"))


@pytest.mark.parametrize("text, where", [
    ((DATA / "negative" / "ibnetdiscover.garbled.txt").read_text(), "ibnetdiscover.garbled.txt:7"),
    ((FAT / "iblinkinfo.txt").read_text(), "iblinkinfo.txt:1"),      # wrong tool's output
    ("# only a header\n#\n", "empty"),
    ("", "empty"),
])
def test_garbled_or_foreign_text_is_a_parse_error(text, where):
    source = where.split(":")[0]
    with pytest.raises(ParseError) as info:
        parse_ibnetdiscover(text, source)
    assert str(info.value).startswith(source)
    if ":" in where:
        assert info.value.line == int(where.split(":")[1])


def test_ibstat_samples():
    (dev,) = parse_ibstat((FAT / "ibstat.node001.ibsim.txt").read_text())
    assert dev.name == "ibsim0" and dev.node_guid == 0x98039b0300c0a010
    assert [(p.number, p.state, p.lid, p.rate) for p in dev.ports] == [(1, "Active", 11, 104.0)]
    two = parse_ibstat((DATA / "infiniband" / "handmade" / "ibstat.node001.two-devices.HANDMADE.txt").read_text())
    assert [(d.name, d.ports[0].state, d.ports[0].link_layer) for d in two] == [
        ("mlx5_0", "Active", "InfiniBand"), ("mlx5_1", "Down", "Ethernet")]
    (port_only,) = parse_ibstat((FAT / "ibstat-port.node001.ibsim.txt").read_text())
    assert port_only.name == "ibsim0" and port_only.ports[0].port_guid == 0x98039b0300c0a011
    (switch,) = parse_ibstat((FAT / "ibstat.ib-spine01-port0.ibsim.txt").read_text())
    assert switch.ports[0].number == 0 and switch.ports[0].lid == 1
    assert parse_ibstat((EDGE / "ibstat.storage01.ibsim.txt").read_text())[0].ports[0].lid == 4
    with pytest.raises(ParseError, match="ibstat.garbled.txt:6"):
        parse_ibstat((DATA / "negative" / "ibstat.garbled.txt").read_text(), "ibstat.garbled.txt")


@pytest.mark.parametrize("name, kind, count", [
    ("ibswitches.txt", "switch", 6), ("ibhosts.txt", "ca", 64), ("ibnodes.txt", None, 70),
    ("ibnetdiscover-l.txt", None, 70), ("ibnetdiscover-S.txt", "switch", 6),
    ("ibnetdiscover-H.txt", "ca", 64),
])
def test_listings_agree_with_the_fabric(name, kind, count):
    fabric = parse_ibnetdiscover((FAT / "ibnetdiscover.txt").read_text())
    listed = parse_ib_listing((FAT / name).read_text(), name)
    assert len(listed) == count
    for node in listed:
        assert fabric.nodes[node.guid].description == node.description
        assert kind is None or node.kind == kind


def test_listing_lids_and_foreign_text():
    switches = parse_ib_listing((EDGE / "ibswitches.txt").read_text())
    assert {s.lid for s in switches} == {1, 2, 7}
    with pytest.raises(ParseError, match="ibstat:1") as info:
        parse_ib_listing((FAT / "ibstat.node001.ibsim.txt").read_text(), "ibstat")
    assert info.value.part == "CA 'ibsim0'"
