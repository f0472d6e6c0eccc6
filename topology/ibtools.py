"""Parsers for the host-side and listing IB tools: ``ibstat`` and ``ibswitches`` /
``ibhosts`` / ``ibnodes`` (also ``ibnetdiscover -l/-H/-S``, the same listing with ids).

>>> devices = parse_ibstat('''CA 'mlx5_0'
... \\tCA type: MT4119
... \\tNumber of ports: 1
... \\tNode GUID: 0x98039b0300c0a010
... \\tPort 1:
... \\t\\tState: Active
... \\t\\tRate: 100
... \\t\\tBase lid: 11
... \\t\\tLink layer: InfiniBand
... ''')
>>> devices[0].name, devices[0].ports[0].state, devices[0].ports[0].lid, devices[0].ports[0].rate
('mlx5_0', 'Active', 11, 100.0)
>>> parse_ib_listing('Switch\\t: 0x7cfe900300a1b102 ports 36 "leaf01" enhanced port 0 lid 7 lmc 0')[0].lid
7
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from .errors import ParseError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class IbstatPort:
    number: int
    state: str
    physical_state: str
    rate: float | None       # Gb/s as ibstat prints it
    lid: int | None
    sm_lid: int | None
    port_guid: int | None
    link_layer: str


@dataclass(frozen=True)
class IbstatDevice:
    name: str
    ca_type: str
    node_guid: int | None
    system_guid: int | None
    ports: tuple[IbstatPort, ...]


def _int(value: str, source: str, line: int) -> int:
    try:
        return int(value, 0)
    except ValueError as error:
        raise ParseError("expected a number", source=source, line=line, part=value) from error


def parse_ibstat(text: str, source: str = "ibstat") -> list[IbstatDevice]:
    """``ibstat`` (all CAs) or ``ibstat CA PORT`` (one port) output."""
    devices: list[IbstatDevice] = []
    device: dict | None = None
    port: dict | None = None

    def close_port():
        nonlocal port
        if port is not None and device is not None:
            device["ports"].append(IbstatPort(
                port["number"], port.get("state", ""), port.get("physical state", ""),
                float(port["rate"]) if "rate" in port else None,
                port.get("base lid"), port.get("sm lid"), port.get("port guid"),
                port.get("link layer", "")))
        port = None

    def close_device():
        nonlocal device
        close_port()
        if device is not None:
            devices.append(IbstatDevice(device["name"], device.get("ca type", device.get("switch type", "")),
                                        device.get("node guid"), device.get("system image guid"),
                                        tuple(device["ports"])))
        device = None

    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = re.match(r"^(?:CA|Switch):?\s+'([^']*)'$", line)
        if match:
            close_device()
            device = {"name": match[1], "ports": []}
            continue
        match = re.match(r"^Port (\d+):$", line)
        if match:
            if device is None:  # `ibstat CA PORT` prints no CA line before the port
                device = {"name": "", "ports": []}
            close_port()
            port = {"number": int(match[1])}
            continue
        if ":" not in line:
            raise ParseError("not ibstat output", source=source, line=number, part=raw)
        key, value = (part.strip() for part in line.split(":", 1))
        key = key.lower()
        target = port if port is not None else device
        if target is None:
            raise ParseError("ibstat field before any CA or Port header", source=source,
                             line=number, part=raw)
        if key in ("base lid", "sm lid", "port guid", "node guid", "system image guid",
                   "lmc", "number of ports"):
            target[key] = _int(value, source, number)
        elif key == "rate":
            try:
                target[key] = float(value)
            except ValueError as error:
                raise ParseError("bad rate", source=source, line=number, part=raw) from error
        else:
            target[key] = value
    close_device()
    if not devices:
        raise ParseError("no CA found in ibstat output", source=source)
    return devices


@dataclass(frozen=True)
class IbListedNode:
    kind: str            # "switch" | "ca" | "router"
    guid: int
    ports: int
    description: str
    lid: int | None      # switches only (CAs have one LID per port, not listed)
    line: int


_LISTING = re.compile(
    r'^(?P<kind>Switch|Ca|Router|Rt)\s*:\s*0x(?P<guid>[0-9a-fA-F]+)\s+ports\s+(?P<ports>\d+)'
    r'(?:\s+devid\s+\S+\s+vendid\s+\S+)?\s+"(?P<desc>.*)"(?P<rest>.*)$')


def parse_ib_listing(text: str, source: str = "ibswitches") -> list[IbListedNode]:
    """``ibswitches``, ``ibhosts``, ``ibnodes`` and ``ibnetdiscover -l/-H/-S`` lines."""
    nodes = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LISTING.match(line)
        if not match:
            raise ParseError("not an ibswitches/ibhosts line", source=source, line=number, part=raw)
        lid = re.search(r"\blid\s+(\d+)", match["rest"])
        kind = {"switch": "switch", "ca": "ca"}.get(match["kind"].lower(), "router")
        nodes.append(IbListedNode(kind, int(match["guid"], 16), int(match["ports"]),
                                  match["desc"], int(lid[1]) if lid else None, number))
    if not nodes:
        raise ParseError("no nodes listed", source=source)
    return nodes
