"""Cray XC (Aries dragonfly): cnames, ``xtprocadmin`` and ``xtnodestat`` -> :class:`Placement`.

A cname ``c<col>-<row>c<chassis>s<slot>n<node>`` names a node: cabinet ``c<col>-<row>``,
chassis 0-2 in the cabinet, slot (blade) 0-15 in the chassis, node 0-3 on the blade. One
Aries router per blade (named ``c0-0c0s2a0`` as Cray does), 16 blades per chassis, 3 chassis
per cabinet, 2 cabinets per electrical group. Groups: by default the two cabinets
``c2k-r`` and ``c2k+1-r`` of one row form a group, numbered row-major
(``row * ceil(cabinets_per_row / 2) + col // 2``, named ``g<N>``). Sites number groups their
own way (ALCF Theta interleaves rows), so a site map ``CABINETS GROUP`` overrides it.

Nodes are placed under their Slurm name ``nid%05d`` and also under their cname.

>>> decode_cname("c0-0c1s9n3")
Cname(col=0, row=0, chassis=1, slot=9, node=3)
>>> decode_cname("c0-0c1s9n3").router, decode_cname("c0-0c1s9n3").chassis_name
('c0-0c1s9a0', 'c0-0c1')
>>> cname_to_nid("c7-5c2s15n3", cabinets_per_row=12)
13055
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

from .errors import InvalidTopology, ParseError

from .placement import Placement

logger = logging.getLogger(__name__)

NODES_PER_BLADE, BLADES_PER_CHASSIS, CHASSIS_PER_CABINET, CABINETS_PER_GROUP = 4, 16, 3, 2
_CNAME = re.compile(r"^c(\d+)-(\d+)c(\d+)s(\d+)n(\d+)$")


@dataclass(frozen=True)
class Cname:
    col: int
    row: int
    chassis: int
    slot: int
    node: int

    @property
    def cabinet(self) -> str:
        return f"c{self.col}-{self.row}"

    @property
    def chassis_name(self) -> str:
        return f"{self.cabinet}c{self.chassis}"

    @property
    def blade(self) -> str:
        return f"{self.chassis_name}s{self.slot}"

    @property
    def router(self) -> str:
        return f"{self.blade}a0"

    def __str__(self) -> str:
        return f"{self.blade}n{self.node}"


def decode_cname(cname: str, *, source: str = "", line: int = 0) -> Cname:
    match = _CNAME.match(cname.strip())
    if not match:
        raise ParseError("not a Cray cname c<col>-<row>c<chassis>s<slot>n<node>",
                         source=source, line=line, part=cname)
    decoded = Cname(*map(int, match.groups()))
    if (decoded.chassis >= CHASSIS_PER_CABINET or decoded.slot >= BLADES_PER_CHASSIS
            or decoded.node >= NODES_PER_BLADE):
        raise ParseError(f"cname out of range (chassis 0-{CHASSIS_PER_CABINET - 1}, slot "
                         f"0-{BLADES_PER_CHASSIS - 1}, node 0-{NODES_PER_BLADE - 1})",
                         source=source, line=line, part=cname)
    return decoded


def cname_to_nid(cname: str, cabinets_per_row: int) -> int:
    """Cray's default NID numbering (cabinets row-major, then chassis, slot, node)."""
    c = decode_cname(cname)
    cabinet = c.row * cabinets_per_row + c.col
    return ((cabinet * CHASSIS_PER_CABINET + c.chassis) * BLADES_PER_CHASSIS + c.slot) \
        * NODES_PER_BLADE + c.node


def default_group(c: Cname, cabinets_per_row: int) -> str:
    groups_per_row = math.ceil(cabinets_per_row / CABINETS_PER_GROUP)
    return f"g{c.row * groups_per_row + c.col // CABINETS_PER_GROUP}"


@dataclass(frozen=True)
class XtNode:
    nid: int
    cname: str
    type: str
    status: str
    mode: str
    line: int


def parse_xtprocadmin(text: str, source: str = "xtprocadmin") -> list[XtNode]:
    """``xtprocadmin`` listing: a header naming the columns, then one node per line.

    Columns are found by header name (NID, NODENAME, TYPE, STATUS, MODE; ``(HEX)`` and any
    extra columns are ignored), so ``xtprocadmin -A`` style extra columns do not break it.
    """
    nodes: list[XtNode] = []
    header: list[str] | None = None
    seen: dict[int, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        fields = raw.split()
        if not fields or raw.lstrip().startswith("#"):
            continue
        if fields[0].upper() == "NID":
            header = [f.upper() for f in fields]
            missing = {"NID", "NODENAME"} - set(header)
            if missing:
                raise ParseError(f"xtprocadmin header lacks {', '.join(sorted(missing))}",
                                 source=source, line=number, part=raw)
            continue
        if header is None:
            raise ParseError("no xtprocadmin header line (NID ... NODENAME ...) before data",
                             source=source, line=number, part=raw)
        if len(fields) != len(header):
            raise ParseError(f"expected {len(header)} columns, found {len(fields)} "
                             "(truncated or garbled line)", source=source, line=number, part=raw)
        row = dict(zip(header, fields))
        try:
            nid = int(row["NID"])
        except ValueError as error:
            raise ParseError("NID is not a number", source=source, line=number, part=raw) from error
        decode_cname(row["NODENAME"], source=source, line=number)
        if nid in seen:
            raise ParseError(f"NID {nid} listed twice (first at line {seen[nid]})",
                             source=source, line=number, part=raw)
        seen[nid] = number
        nodes.append(XtNode(nid, row["NODENAME"], row.get("TYPE", ""), row.get("STATUS", ""),
                            row.get("MODE", ""), number))
    if not nodes:
        raise ParseError("no nodes in xtprocadmin output", source=source)
    return nodes


@dataclass(frozen=True)
class XtNodestatSlot:
    cname: str
    state: str      # the grid character: '-' free, 'S' service, 'X' down, a job letter, ...
    line: int


_CABINET_HEADER = re.compile(r"^\s*(C\d+-\d+)(\s+C\d+-\d+)*\s*$", re.IGNORECASE)
_GRID_ROW = re.compile(r"^(?:c(\d+))?\s*n(\d+) ")


def parse_xtnodestat(text: str, source: str = "xtnodestat") -> list[XtNodestatSlot]:
    """The ``xtnodestat`` grid: cabinet header, then rows ``n3``..``c0n0`` of slot characters.

    Column positions come from the slot ruler line (``s0123456789abcdef 0123...``); a blank
    cell is a slot without that node. Rows above a ``c<N>n0`` label belong to chassis N.
    """
    lines = text.splitlines()
    result: list[XtNodestatSlot] = []
    cabinets: list[str] = []
    pending: list[tuple[int, int, str]] = []  # (line number, node, row text) awaiting chassis
    rows: list[tuple[int, int, int, str]] = []  # (line number, chassis, node, row text)
    for number, raw in enumerate(lines, 1):
        if _CABINET_HEADER.match(raw):
            cabinets = [c.lower() for c in raw.split()]
            rows = []
            continue
        match = _GRID_ROW.match(raw)
        if match and cabinets:
            pending.append((number, int(match[2]), raw))
            if match[1] is not None:
                for line_no, node, row_text in pending:
                    rows.append((line_no, int(match[1]), node, row_text))
                pending = []
            continue
        if raw.strip().startswith("s0") and cabinets:
            ruler_start = raw.index("s0") + 1
            columns = [i for i in range(ruler_start, len(raw)) if raw[i] != " "]
            if len(columns) != BLADES_PER_CHASSIS * len(cabinets):
                raise ParseError(f"slot ruler has {len(columns)} columns for {len(cabinets)} "
                                 "cabinets", source=source, line=number, part=raw)
            if pending:
                raise ParseError("grid rows without a c<N>n0 chassis label (truncated?)",
                                 source=source, line=pending[0][0], part=pending[0][2])
            for line_no, chassis, node, row_text in rows:
                for index, column in enumerate(columns):
                    cell = row_text[column] if column < len(row_text) else " "
                    if cell == " ":
                        continue
                    cabinet = cabinets[index // BLADES_PER_CHASSIS]
                    slot = index % BLADES_PER_CHASSIS
                    cname = f"{cabinet}c{chassis}s{slot}n{node}"
                    decode_cname(cname, source=source, line=line_no)
                    result.append(XtNodestatSlot(cname, cell, line_no))
            cabinets = []
    if pending or cabinets:  # a cabinet header whose grid never reached its slot ruler
        raise ParseError("xtnodestat grid ends before its slot ruler line (truncated?)",
                         source=source, line=len(lines))
    if not result:
        raise ParseError("no xtnodestat grid found", source=source)
    return result


def placement_from_cnames(nodes: list[tuple[str, str | None]], *, group_map: dict[str, str] | None = None,
                          cabinets_per_row: int | None = None, source: str = "",
                          warnings: tuple[str, ...] = ()) -> Placement:
    """``nodes`` = (cname, hostname or None); path = (Aries router, chassis, group)."""
    decoded = [(decode_cname(cname), host) for cname, host in nodes]
    if cabinets_per_row is None:
        cabinets_per_row = max(c.col for c, _ in decoded) + 1
    paths: dict[str, tuple[str, str, str]] = {}
    missing: set[str] = set()
    for c, host in decoded:
        if group_map is not None:
            group = group_map.get(c.cabinet)
            if group is None:
                missing.add(c.cabinet)
                continue
            group = f"g{group}" if group.isdigit() else group
        else:
            group = default_group(c, cabinets_per_row)
        path = (c.router, c.chassis_name, group)
        paths[str(c)] = path
        if host:
            paths[host] = path
    if missing:
        raise InvalidTopology(f"site map gives no group for cabinet(s): {', '.join(sorted(missing))}")
    return Placement("dragonfly", ("aries", "chassis", "group"), paths, warnings, source)


def placement_from_xtprocadmin(nodes: list[XtNode], group_map: dict[str, str] | None = None,
                               cabinets_per_row: int | None = None, source: str = "xtprocadmin") -> Placement:
    return placement_from_cnames([(n.cname, f"nid{n.nid:05d}") for n in nodes],
                                 group_map=group_map, cabinets_per_row=cabinets_per_row, source=source)
