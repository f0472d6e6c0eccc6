"""InfiniBand fabric -> :class:`Placement` (node -> leaf switch -> pod or rack).

* **Hostname** = a CA's node description up to the first space (``"gpu01 mlx5_0"`` ->
  ``gpu01``). Descriptions that are a vendor default (``MT4123 ConnectX6   Mellanox
  Technologies``) or empty carry no hostname: the CA is reported in the warnings, not placed.
* **Switch names**: the node description when it is unique among switches, else the GUID
  (``0xb8cef60300aa0101``) — unmanaged leaves often share ``Quantum Mellanox Technologies``.
* **Leaf** = the switch a host's CA port is cabled to. A host on several leaves (multi-rail:
  two CAs; or a dual-port CA cabled to two leaves) is placed under the leaf of its first CA
  port (CA description, then port number order) and a warning names every attachment.
* **Pod** (derived) = the set of switches a leaf uplinks to: leaves wired to the same spines
  share a pod, named by those spines (hostlist-folded when possible). A site map (leaf switch
  name or GUID -> rack) replaces it with a ``rack`` level; a leaf the map misses is an error.

>>> from hpcpredict.topology.ibnetdiscover import parse_ibnetdiscover
>>> text = '''Switch 4 "S-0000000000000001"  # "leaf1" base port 0 lid 2 lmc 0
... [1] "H-0000000000000010"[1](11)  # "n1 HCA-1" lid 3 4xEDR
... [4] "S-0000000000000009"[1]  # "spine" lid 1 4xEDR
... Switch 4 "S-0000000000000009"  # "spine" base port 0 lid 1 lmc 0
... [1] "S-0000000000000001"[4]  # "leaf1" lid 2 4xEDR
... Ca 1 "H-0000000000000010"  # "n1 HCA-1"
... [1](11) "S-0000000000000001"[1]  # lid 3 lmc 0 "leaf1" lid 2 4xEDR
... '''
>>> placement_from_fabric(parse_ibnetdiscover(text)).path("n1")
('leaf1', 'spine')
"""
from __future__ import annotations

import logging
import re
from collections import defaultdict

from .errors import InvalidTopology

from .hostlist import fold
from .ibnetdiscover import IbFabric
from .placement import Placement

logger = logging.getLogger(__name__)

# Descriptions firmware sets when nobody configured one: no hostname in them.
_NO_HOSTNAME = re.compile(r"^(MT\d+\b|.*\bMellanox Technologies\b|.*\bConnectX|"
                          r"Unknown|localhost\b)", re.IGNORECASE)


_HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def hostname_of(description: str) -> str | None:
    """Host part of a CA description, or None when the description names no host (a vendor
    default, or a first word that is not a valid hostname, as in a garbled capture)."""
    description = description.strip()
    if not description or _NO_HOSTNAME.match(description):
        return None
    host = description.split()[0]
    return host if _HOSTNAME.match(host) else None


def switch_names(fabric: IbFabric) -> dict[int, str]:
    """GUID -> display name (description if unique among switches, else the GUID)."""
    switches = [n for n in fabric.nodes.values() if n.kind == "switch"]
    count: dict[str, int] = defaultdict(int)
    for node in switches:
        count[node.description] += 1
    return {n.guid: (n.description if n.description and count[n.description] == 1
                     else f"0x{n.guid:016x}") for n in switches}


def placement_from_fabric(fabric: IbFabric, site_map: dict[str, str] | None = None) -> Placement:
    warnings = list(fabric.warnings)
    names = switch_names(fabric)
    nodes = fabric.nodes
    neighbours: dict[int, set[int]] = defaultdict(set)
    # host -> [(ca description, ca port, leaf guid, line)]
    attachments: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    unnamed: dict[int, int] = {}
    for link in fabric.links:
        a, b = nodes[link.guid_a], nodes[link.guid_b]
        if a.kind == "switch" and b.kind == "switch":
            neighbours[a.guid].add(b.guid)
            neighbours[b.guid].add(a.guid)
            continue
        if a.kind == "switch":
            a, b = b, a
            ca_port = link.port_b
        else:
            ca_port = link.port_a
        if b.kind != "switch":
            warnings.append(f"{fabric.source}:{link.line}: CA {a.description!r} is cabled to "
                            f"{b.kind} {b.description!r}, not to a switch; not placed")
            continue
        host = hostname_of(a.description) if a.kind == "ca" else None
        if host is None:
            if a.kind == "ca":
                unnamed.setdefault(a.guid, link.line)
            continue
        attachments[host].append((a.description, ca_port, b.guid, link.line))
    for guid, line in sorted(unnamed.items(), key=lambda item: item[1]):
        warnings.append(f"{fabric.source}:{line}: CA 0x{guid:016x} description "
                        f"{nodes[guid].description!r} carries no hostname; not placed")

    leaf_of: dict[str, int] = {}
    for host, places in attachments.items():
        places.sort()
        leaf_of[host] = places[0][2]
        leaves = {leaf for _, _, leaf, _ in places}
        if len(leaves) > 1:
            detail = "; ".join(f"{desc!r} port {port} -> {names[leaf]} (line {line})"
                               for desc, port, leaf, line in places)
            warnings.append(f"{fabric.source}:{places[0][3]}: host {host} is attached to "
                            f"{len(leaves)} leaf switches ({detail}); placed under "
                            f"{names[places[0][2]]}")
    if not leaf_of:
        first = f"; {len(warnings)} warning(s), first: {warnings[0]}" if warnings else ""
        raise InvalidTopology(f"{fabric.source}: no host with a hostname is cabled to a switch{first}")

    leaves = set(leaf_of.values())
    if site_map is not None:
        level, upper = "rack", {}
        missing = []
        for leaf in leaves:
            rack = site_map.get(names[leaf], site_map.get(f"0x{leaf:016x}"))
            if rack is None:
                missing.append(names[leaf])
            else:
                upper[leaf] = rack
        if missing:
            raise InvalidTopology(f"site map gives no rack for leaf switch(es): "
                                  f"{', '.join(sorted(missing))}")
    else:
        level, upper = "pod", {}
        for leaf in leaves:
            uplinks = {n for n in neighbours[leaf] if n not in leaves} or neighbours[leaf]
            upper[leaf] = fold(names[n] for n in uplinks) if uplinks else names[leaf]
    paths = {host: (names[leaf], upper[leaf]) for host, leaf in leaf_of.items()}
    if warnings:
        logger.warning("%s: %d warning(s) while placing the fabric; first: %s",
                       fabric.source, len(warnings), warnings[0])
    return Placement("infiniband", ("switch", level), paths, tuple(warnings), fabric.source)
