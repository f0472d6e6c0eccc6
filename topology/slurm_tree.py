"""Slurm ``topology.conf`` (topology/tree) and ``scontrol show topology`` -> :class:`Placement`.

Both are lines of ``Key=Value`` pairs with ``SwitchName``, ``Nodes`` (hostlist) and
``Switches`` (hostlist of child switches). Keys are case-insensitive, ``#`` starts a comment
(topology.conf). In ``scontrol`` output a switch above level 0 also lists every node below it
in ``Nodes``; those are derived, so ``Nodes`` counts only on switches without ``Switches``.
``$ ...`` prompt lines and ``scontrol: error: ...`` lines (captured sessions) are skipped
with a warning, and so are child switches missing from scontrol output (a per-name query
prints only part of the tree); in topology.conf a missing child is an error.

Placement: levels ``level1`` (the switch a node is listed under), ``level2`` (its parent),
... A switch with several parents (fat tree: a leaf under two spines) gets as its ancestor
the *set* of parents, folded as a hostlist (``ib-spine[01-02]``); the set's parents are the
union of its members' parents. Nodes in shallower subtrees repeat their top ancestor so every
path has the same length. A node under two leaf switches, a switch defined twice with
different contents, an undefined child switch and a cycle are errors naming the line.

>>> conf = '''SwitchName=s1 Nodes=n[1-2]
... switchname=s2 nodes=n3   # comment
... SwitchName=top Switches=s[1-2]'''
>>> p = placement_from_tree(parse_topology_conf(conf))
>>> p.levels, p.path("n3")
(('level1', 'level2'), ('s2', 'top'))
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from .errors import InvalidTopology, ParseError

from .hostlist import expand, fold
from .placement import Placement

logger = logging.getLogger(__name__)

_PAIR = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class SwitchEntry:
    name: str
    nodes: tuple[str, ...]
    switches: tuple[str, ...]
    level: int | None
    line: int


@dataclass(frozen=True)
class TreeTopology:
    switches: tuple[SwitchEntry, ...]
    warnings: tuple[str, ...]
    source: str
    partial_ok: bool = False   # scontrol output may be a per-name query: children can be absent


def _parse(text: str, source: str, derived_nodes: bool) -> TreeTopology:
    entries: dict[str, SwitchEntry] = {}
    warnings: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("$ ") or line.lower().startswith("scontrol:"):
            warnings.append(f"{source}:{number}: not a switch line, skipped: {raw.strip()!r}")
            continue
        pairs = _PAIR.findall(line)
        leftover = _PAIR.sub("", line).strip()
        if leftover or not pairs:
            raise ParseError("expected Key=Value pairs", source=source, line=number, part=raw)
        values: dict[str, str] = {}
        for key, value in pairs:
            key = key.lower()
            if key in values:
                raise ParseError(f"key {key} given twice", source=source, line=number, part=raw)
            values[key] = value
        name = values.get("switchname")
        if not name:
            raise ParseError("line has no SwitchName", source=source, line=number, part=raw)
        switches = tuple(expand(values["switches"], source=source, line=number)) \
            if "switches" in values else ()
        nodes = tuple(expand(values["nodes"], source=source, line=number)) if "nodes" in values else ()
        if derived_nodes and switches:
            nodes = ()
        level = None
        if "level" in values:
            if not values["level"].isdigit():
                raise ParseError("Level is not a number", source=source, line=number, part=raw)
            level = int(values["level"])
        entry = SwitchEntry(name, nodes, switches, level, number)
        old = entries.get(name)
        if old is not None:
            if (old.nodes, old.switches) != (nodes, switches):
                raise ParseError(f"switch {name} defined again with different contents (first at "
                                 f"line {old.line})", source=source, line=number, part=raw)
            continue
        entries[name] = entry
    if not entries:
        raise ParseError("no SwitchName lines found", source=source)
    if warnings:
        logger.warning("%s: %d line(s) skipped; first: %s", source, len(warnings), warnings[0])
    return TreeTopology(tuple(entries.values()), tuple(warnings), source, partial_ok=derived_nodes)


def parse_topology_conf(text: str, source: str = "topology.conf") -> TreeTopology:
    return _parse(text, source, derived_nodes=False)


def parse_scontrol_topology(text: str, source: str = "scontrol show topology") -> TreeTopology:
    return _parse(text, source, derived_nodes=True)


def placement_from_tree(tree: TreeTopology) -> Placement:
    source = tree.source
    by_name = {s.name: s for s in tree.switches}
    parents: dict[str, set[str]] = {name: set() for name in by_name}
    warnings = list(tree.warnings)
    for switch in tree.switches:
        for child in switch.switches:
            if child not in by_name and tree.partial_ok:
                warnings.append(f"{source}:{switch.line}: child switch {child!r} of {switch.name} "
                                "is not in this (partial?) output; ignored")
                continue
            if child not in by_name:
                raise InvalidTopology(f"{source}:{switch.line}: switch {switch.name} lists child "
                                      f"switch {child!r}, which is not defined")
            parents[child].add(switch.name)
    leaf_of: dict[str, SwitchEntry] = {}
    for switch in tree.switches:
        for node in switch.nodes:
            if node in by_name:
                raise InvalidTopology(f"{source}:{switch.line}: {node!r} is listed as a node of "
                                      f"{switch.name} but is also a switch name")
            first = leaf_of.get(node)
            if first is not None:
                raise InvalidTopology(f"{source}:{switch.line}: node {node} is listed under two "
                                      f"switches, {first.name} (line {first.line}) and "
                                      f"{switch.name} (line {switch.line})")
            leaf_of[node] = switch
    if not leaf_of:
        raise InvalidTopology(f"{source}: no switch lists any node")

    chains: dict[str, tuple[str, ...]] = {}

    def chain(leaf: str) -> tuple[str, ...]:
        """Ancestor names of ``leaf`` (itself first), walking up parent sets."""
        if leaf in chains:
            return chains[leaf]
        names, current, seen = [leaf], {leaf}, {leaf}
        while True:
            up = set().union(*(parents[s] for s in current))
            if not up:
                break
            if up & seen:
                raise InvalidTopology(f"{source}:{by_name[leaf].line}: switch hierarchy above "
                                      f"{leaf} has a cycle through {', '.join(sorted(up & seen))}")
            seen |= up
            names.append(fold(up) if len(up) > 1 else next(iter(up)))
            current = up
        chains[leaf] = tuple(names)
        return chains[leaf]

    depth = max(len(chain(s.name)) for s in set(leaf_of.values()))
    paths = {}
    for node, leaf in leaf_of.items():
        path = chain(leaf.name)
        paths[node] = path + (path[-1],) * (depth - len(path))
    levels = tuple(f"level{i}" for i in range(1, depth + 1))
    return Placement("tree", levels, paths, tuple(warnings), source)
