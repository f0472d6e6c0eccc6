"""Hostlist expressions (``node[001-016,020]``) via ClusterShell, with our error type.

>>> expand("node[001-003,010]")
['node001', 'node002', 'node003', 'node010']
>>> fold(["ib-spine02", "ib-spine01"])
'ib-spine[01-02]'
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
from ClusterShell.RangeSet import RangeSetException

from hpcpredict.daemon.errors import ParseError


# Slurm hostlists are plain ``prefix[ranges],...``; ClusterShell's extras (@groups, the set
# operators ! & ^, blanks) would silently change what a topology file means, so refuse them.
_NOT_SLURM = re.compile(r"[@!&^\s]")


def expand(expression: str, *, source: str = "", line: int = 0) -> list[str]:
    """Names in a hostlist expression, sorted as ClusterShell sorts them."""
    expression = expression.strip()
    bad = _NOT_SLURM.search(expression)
    if bad or not expression:
        why = f"{bad.group()!r} is not hostlist syntax" if bad else "empty"
        raise ParseError(f"bad hostlist expression ({why})", source=source, line=line, part=expression)
    try:
        names = list(NodeSet(expression, resolver=RESOLVER_NOGROUP))
    except (NodeSetException, RangeSetException, ValueError) as error:
        raise ParseError(f"bad hostlist expression ({error})", source=source, line=line,
                         part=expression) from error
    if not names:
        raise ParseError("hostlist expression names no host", source=source, line=line, part=expression)
    return names


def fold(names: Iterable[str]) -> str:
    """Shortest hostlist expression for ``names`` (used to name a set of switches)."""
    return _fold(frozenset(names))


@lru_cache(maxsize=4096)
def _fold(names: frozenset[str]) -> str:
    # Cached: a fabric names the same few switch sets (spines of a pod) once per leaf.
    try:
        return str(NodeSet.fromlist(names, resolver=RESOLVER_NOGROUP))
    except (NodeSetException, RangeSetException, ValueError):
        # Names that are not hostlist-friendly (IB descriptions with ';' '/' ...) are joined.
        return ",".join(sorted(names))
