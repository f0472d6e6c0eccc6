"""Simulated fabrics: SimGrid platform XML and the matching placement model.

Shapes are SimGrid's ``topo_parameters`` strings. Fat tree ``h;m1,..,mh;w1,..;p1,..``: a
leaf switch holds ``m1`` nodes, host id order makes node ``i``'s leaf ``i // m1`` and (for
``h >= 2``) its pod ``i // (m1*m2)`` — these become the placement's ``switch`` and ``rack``
levels (kind ``infiniband``). Dragonfly ``G,Lg;C,Lc;R,Lr;N``: node ``i``'s router (Aries) is
``i // N``, chassis ``i // (N*R)``, group ``i // (N*R*C)`` (kind ``dragonfly``).

Link parameters are ours (InfiniBand EDR / Aries-like orders of magnitude), not a
calibrated machine: results are a simulated stand-in, labelled as such wherever reported.

>>> fabric_size("fattree", "3;8,4,4;1,4,2;1,1,1")
128
>>> fabric_placement("dragonfly", "2,1;2,1;2,1;2").path("node-5")
('a2', 'c1', 'g0')
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import InvalidRequest
from ....topology.placement import Placement

HOST_PREFIX = "node-"


@dataclass(frozen=True)
class LinkParams:
    bw: str = "12.5GBps"           # node and switch links (100 Gb/s class)
    lat: str = "1us"
    loopback_bw: str = "40GBps"    # intra-node copies (FATPIPE: no contention in a node)
    loopback_lat: str = "0.3us"


def _ints(text: str, field: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError as error:
        raise InvalidRequest("shape", f"bad {field} list {text!r}") from error
    if any(v < 1 for v in values):
        raise InvalidRequest("shape", f"{field} values must be >= 1: {text!r}")
    return values


def parse_shape(fabric: str, shape: str) -> list[list[int]]:
    parts = shape.split(";")
    if fabric == "fattree":
        if len(parts) != 4:
            raise InvalidRequest("shape", f"fat tree shape is 'h;m..;w..;p..', got {shape!r}")
        h = _ints(parts[0], "h")
        lists = [_ints(p, name) for p, name in zip(parts[1:], ("m", "w", "p"))]
        if len(h) != 1 or any(len(lst) != h[0] for lst in lists):
            raise InvalidRequest("shape", f"fat tree needs h values per list: {shape!r}")
        return [h] + lists
    if fabric == "dragonfly":
        if len(parts) != 4:
            raise InvalidRequest("shape", f"dragonfly shape is 'G,Lg;C,Lc;R,Lr;N', got {shape!r}")
        lists = [_ints(p, f"part {i + 1}") for i, p in enumerate(parts)]
        if [len(x) for x in lists] != [2, 2, 2, 1]:
            raise InvalidRequest("shape", f"dragonfly shape is 'G,Lg;C,Lc;R,Lr;N', got {shape!r}")
        return lists
    raise InvalidRequest("fabric", f"unknown fabric {fabric!r} (fattree or dragonfly)")


def fabric_size(fabric: str, shape: str) -> int:
    lists = parse_shape(fabric, shape)
    if fabric == "fattree":
        return math.prod(lists[1])
    return lists[0][0] * lists[1][0] * lists[2][0] * lists[3][0]


def host_names(fabric: str, shape: str) -> list[str]:
    return [f"{HOST_PREFIX}{i}" for i in range(fabric_size(fabric, shape))]


def fabric_placement(fabric: str, shape: str) -> Placement:
    """The placement model (node -> ancestors) that a topology parser would give."""
    lists = parse_shape(fabric, shape)
    names = host_names(fabric, shape)
    if fabric == "fattree":
        m = lists[1]
        per_switch = m[0]
        per_rack = m[0] * m[1] if len(m) >= 2 else len(names)
        switch_rack = {name: (f"s{i // per_switch}", f"r{i // per_rack}") for i, name in enumerate(names)}
        return Placement("infiniband", ("switch", "rack"), switch_rack,
                         source=f"SimGrid fat tree {shape} (simulated)")
    (_, _), (chassis, _), (routers, _), (per_router,) = lists
    paths = {name: (f"a{i // per_router}", f"c{i // (per_router * routers)}",
                    f"g{i // (per_router * routers * chassis)}") for i, name in enumerate(names)}
    return Placement("dragonfly", ("aries", "chassis", "group"), paths,
                     source=f"SimGrid dragonfly {shape} (simulated)")


def platform_xml(fabric: str, shape: str, links: LinkParams = LinkParams()) -> str:
    """SimGrid 3.32 platform: one cluster zone with the fabric's topology."""
    size = fabric_size(fabric, shape)
    topology = "FAT_TREE" if fabric == "fattree" else "DRAGONFLY"
    return (
        "<?xml version='1.0'?>\n"
        "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\">\n"
        f"  <cluster id=\"fabric\" prefix=\"{HOST_PREFIX}\" suffix=\"\" radical=\"0-{size - 1}\"\n"
        f"           speed=\"1Gf\" bw=\"{links.bw}\" lat=\"{links.lat}\"\n"
        f"           loopback_bw=\"{links.loopback_bw}\" loopback_lat=\"{links.loopback_lat}\"\n"
        f"           sharing_policy=\"SPLITDUPLEX\" topology=\"{topology}\" topo_parameters=\"{shape}\"/>\n"
        "</platform>\n")
