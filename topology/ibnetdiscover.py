"""Parse ``ibnetdiscover`` output (default, ``-g`` and ``-p`` formats) into an :class:`IbFabric`.

A fabric is IB nodes (switches, CAs, routers) keyed by GUID plus the links between their
ports. Nothing here decides hostnames or levels; :mod:`hpcpredict.topology.infiniband` does.

* Default / ``-g``: one record per node (``vendid=``... then ``Switch 36 "S-<guid>" # "desc"``
  or ``Ca 1 "H-<guid>" # "desc"``) followed by one line per connected port. ``-g`` adds
  chassis headers and a trailing ``#`` on ``switchguid=`` lines. ``--node-name-map`` only
  changes the quoted descriptions, so both parse alike.
* ``-p``: one line per port, ``CA 6 1 0x0c42... 4x EDR - SW 7 6 0xb8ce... ( 'a' - 'b' )``.
  It carries port GUIDs for CAs (not node GUIDs), so a dual-port CA appears as two CAs with
  the same description; hostnames group them again later.

Lines that fit no known form are kept as warnings with their line number. A file in which
no node could be read, or where more than a quarter of the lines are unreadable, is an error.

>>> text = '''Switch 4 "S-0000000000000001"  # "leaf1" base port 0 lid 2 lmc 0
... [1] "H-0000000000000010"[1](11)  # "n1 HCA-1" lid 3 4xEDR
...
... Ca 1 "H-0000000000000010"  # "n1 HCA-1"
... [1](11) "S-0000000000000001"[1]  # lid 3 lmc 0 "leaf1" lid 2 4xEDR
... '''
>>> fabric = parse_ibnetdiscover(text)
>>> sorted(n.description for n in fabric.nodes.values())
['leaf1', 'n1 HCA-1']
>>> len(fabric.links)
1
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from .errors import ParseError

logger = logging.getLogger(__name__)

KIND_BY_PREFIX = {"S": "switch", "H": "ca", "R": "router"}
KIND_BY_WORD = {"switch": "switch", "ca": "ca", "rt": "router", "sw": "switch", "router": "router"}

_HEADER = re.compile(
    r'^(?P<word>Switch|Ca|Rt)\s+(?P<ports>\d+)\s+"(?P<prefix>[SHR])-(?P<guid>[0-9a-fA-F]+)"'
    r'\s*(?:#\s*"(?P<desc>.*)"(?P<rest>.*))?$')
_PORT = re.compile(
    r'^\[(?P<port>\d+)\](?:\((?P<portguid>[0-9a-fA-F]+)\))?\s+'
    r'"(?P<prefix>[SHR])-(?P<guid>[0-9a-fA-F]+)"\[(?P<rport>\d+)\](?:\([0-9a-fA-F]+\))?'
    r'\s*(?:#.*)?$')
_KEY_PREFIXES = ("vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "routerguid=")
# -g chassis grouping headers ("Non-Chassis Nodes", "Chassis 1 (...)", "Spine Nodes", ...).
_GROUPING = re.compile(r'^(Non-Chassis Nodes|Chassis\b.*|(Spine|Line|Leaf)\s+Nodes?\b.*|'
                       r'-+\s*\w.*)$', re.IGNORECASE)
_PLINE = re.compile(
    r"^(?P<ka>CA|SW|RT)\s+(?P<lida>\d+)\s+(?P<porta>\d+)\s+0x(?P<guida>[0-9a-fA-F]+)\s+\S+\s+\S+"
    r"\s+-\s+(?P<kb>CA|SW|RT)\s+(?P<lidb>\d+)\s+(?P<portb>\d+)\s+0x(?P<guidb>[0-9a-fA-F]+)"
    r"\s+\(\s*'(?P<desca>.*)'\s+-\s+'(?P<descb>.*)'\s*\)\s*$")
_PLINE_UNCONNECTED = re.compile(
    r"^(CA|SW|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s+\S+\s+\S+\s+'.*'\s*$")


@dataclass(frozen=True)
class IbNode:
    guid: int
    kind: str          # "switch" | "ca" | "router"
    description: str
    ports: int
    line: int          # where the node's record (or first mention) is


@dataclass(frozen=True)
class IbLink:
    guid_a: int
    port_a: int
    guid_b: int
    port_b: int
    line: int


@dataclass(frozen=True)
class IbFabric:
    nodes: dict[int, IbNode]
    links: tuple[IbLink, ...]
    warnings: tuple[str, ...] = ()
    source: str = ""
    fmt: str = "default"


@dataclass
class _Reader:
    """Shared bookkeeping: warnings with line numbers and the give-up rule."""

    source: str
    warnings: list[str] = field(default_factory=list)
    bad_lines: int = 0
    lines: int = 0
    first_bad: tuple[int, str] | None = None

    def warn(self, line: int, message: str, part: str = "") -> None:
        text = f"{self.source}:{line}: {message}" + (f": {part!r}" if part else "")
        self.warnings.append(text)

    def unreadable(self, line: int, raw: str) -> None:
        self.bad_lines += 1
        if self.first_bad is None:
            self.first_bad = (line, raw)
        self.warn(line, "unrecognised line skipped", raw.strip()[:120])

    def finish(self, nodes: dict, what: str) -> None:
        where = self.first_bad or (0, "")   # (none: the file's start)
        if not nodes:
            raise ParseError(f"no {what} records found (empty, truncated or not {what} output)",
                             source=self.source, line=where[0], part=where[1].strip()[:120])
        if self.bad_lines * 4 > max(self.lines, 1):
            line, raw = where
            raise ParseError(f"{self.bad_lines} of {self.lines} lines are not {what} output "
                             "(garbled file?); first", source=self.source, line=line,
                             part=raw.strip()[:120])
        if self.warnings:
            logger.warning("%s: %d warning(s) while parsing %s; first: %s",
                           self.source, len(self.warnings), what, self.warnings[0])


def detect_format(text: str) -> str:
    """``"p"`` for ``ibnetdiscover -p`` output, else ``"default"`` (covers ``-g``)."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if _PLINE.match(line) or _PLINE_UNCONNECTED.match(line):
            return "p"
        return "default"
    return "default"


def parse_ibnetdiscover(text: str, source: str = "ibnetdiscover",
                        node_name_map: dict[int, str] | None = None) -> IbFabric:
    """Parse any supported ``ibnetdiscover`` format (detected from the first record)."""
    if detect_format(text) == "p":
        fabric = parse_ibnetdiscover_ports(text, source)
    else:
        fabric = parse_ibnetdiscover_default(text, source)
    if node_name_map:
        fabric = apply_node_name_map(fabric, node_name_map)
    return fabric


def parse_ibnetdiscover_default(text: str, source: str = "ibnetdiscover") -> IbFabric:
    """Default and ``-g`` formats."""
    reader = _Reader(source)
    nodes: dict[int, IbNode] = {}
    mentioned: dict[int, tuple[str, int, int]] = {}  # guid -> (kind, line, linked-from guid)
    links: dict[tuple[int, int], tuple[tuple[int, int], int]] = {}  # end a -> (end b, line)
    current: IbNode | None = None
    count = 0
    # The loop is the 10,000-node fabric's hot spot: dispatch on the first character so each
    # line meets at most one regular expression.
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        count += 1
        first = line[0]
        if first == "[":
            match = _PORT.match(line)
            if match is None or current is None:
                reader.unreadable(number, raw)
                continue
            port, _, prefix, remote_hex, rport = match.groups()
            remote = int(remote_hex, 16)
            mentioned.setdefault(remote, (KIND_BY_PREFIX[prefix], number, current.guid))
            key_a, key_b = (current.guid, int(port)), (remote, int(rport))
            if key_b not in links and key_a not in links:
                links[key_a] = (key_b, number)
            continue
        if line.startswith(_KEY_PREFIXES):
            continue
        match = _HEADER.match(line) if first in "SCR" else None
        if match:
            guid = int(match["guid"], 16)
            kind = KIND_BY_PREFIX[match["prefix"]]
            if guid in nodes:
                reader.warn(number, f"node {match['prefix']}-{match['guid']} described twice "
                            f"(first at line {nodes[guid].line}); keeping the first")
                current = nodes[guid]
                continue
            current = IbNode(guid, kind, match["desc"] or "", int(match["ports"]), number)
            nodes[guid] = current
            continue
        if _GROUPING.match(line):
            continue
        reader.unreadable(number, raw)
    reader.lines = count
    reader.finish(nodes, "ibnetdiscover")
    for guid, (kind, number, via) in sorted(mentioned.items(), key=lambda item: item[1][1]):
        if guid not in nodes:
            reader.warn(number, f"{kind} 0x{guid:016x} is linked from 0x{via:016x} but has no "
                        "record of its own (truncated file?); its links are dropped")
    link_list = tuple(IbLink(a[0], a[1], b[0], b[1], number) for a, (b, number) in links.items()
                      if a[0] in nodes and b[0] in nodes)
    return IbFabric(nodes, link_list, tuple(reader.warnings), source, "default")


def parse_ibnetdiscover_ports(text: str, source: str = "ibnetdiscover -p") -> IbFabric:
    """``-p`` format: CAs are keyed by port GUID (the only GUID this format prints)."""
    reader = _Reader(source)
    nodes: dict[int, IbNode] = {}
    links: dict[frozenset, IbLink] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        reader.lines += 1
        match = _PLINE.match(line)
        if not match:
            if not _PLINE_UNCONNECTED.match(line):
                reader.unreadable(number, raw)
            continue
        ends = []
        for side in "ab":
            guid = int(match[f"guid{side}"], 16)
            kind = KIND_BY_WORD[match[f"k{side}"].lower()]
            desc = match[f"desc{side}"]
            known = nodes.get(guid)
            if known is None:
                nodes[guid] = IbNode(guid, kind, desc, 0, number)
            elif known.description != desc or known.kind != kind:
                reader.warn(number, f"0x{guid:016x} is {kind} {desc!r} here but {known.kind} "
                            f"{known.description!r} at line {known.line}")
            ends.append((guid, int(match[f"port{side}"])))
        key = frozenset(ends)
        if key not in links:
            links[key] = IbLink(ends[0][0], ends[0][1], ends[1][0], ends[1][1], number)
    reader.finish(nodes, "ibnetdiscover -p")
    return IbFabric(nodes, tuple(links.values()), tuple(reader.warnings), source, "p")


def parse_node_name_map(text: str, source: str = "node-name-map") -> dict[int, str]:
    """``GUID "name"`` lines as read by ``ibnetdiscover --node-name-map``."""
    mapping: dict[int, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r'^(0x[0-9a-fA-F]+|[0-9a-fA-F]+)\s+"(.*)"\s*(#.*)?$', line)
        if not match:
            raise ParseError('expected GUID "name"', source=source, line=number, part=raw)
        mapping[int(match[1], 16)] = match[2]
    return mapping


def apply_node_name_map(fabric: IbFabric, mapping: dict[int, str]) -> IbFabric:
    """Replace descriptions as ``--node-name-map`` would (for output captured without it).

    Maps are keyed by node GUID; ``-p`` output keys CAs by port GUID, so there only switch
    entries (whose port 0 GUID is the node GUID) apply.
    """
    nodes = {guid: IbNode(n.guid, n.kind, mapping.get(guid, n.description), n.ports, n.line)
             for guid, n in fabric.nodes.items()}
    return IbFabric(nodes, fabric.links, fabric.warnings, fabric.source, fabric.fmt)
