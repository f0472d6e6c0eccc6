"""Hostlist expressions (``node[001-016,020]``) via ClusterShell, with our error type.

>>> expand("node[001-003,010]")
['node001', 'node002', 'node003', 'node010']
>>> fold(["ib-spine02", "ib-spine01"])
'ib-spine[01-02]'
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from ClusterShell.NodeSet import NodeSet, NodeSetException
from ClusterShell.RangeSet import RangeSetException

from hpcpredict.daemon.errors import ParseError


def expand(expression: str, *, source: str = "", line: int = 0) -> list[str]:
    """Names in a hostlist expression, sorted as ClusterShell sorts them."""
    try:
        return list(NodeSet(expression.strip()))
    except (NodeSetException, RangeSetException, ValueError) as error:
        raise ParseError(f"bad hostlist expression ({error})", source=source, line=line,
                         part=expression) from error


def fold(names: Iterable[str]) -> str:
    """Shortest hostlist expression for ``names`` (used to name a set of switches)."""
    return _fold(frozenset(names))


@lru_cache(maxsize=4096)
def _fold(names: frozenset[str]) -> str:
    # Cached: a fabric names the same few switch sets (spines of a pod) once per leaf.
    try:
        return str(NodeSet.fromlist(names))
    except (NodeSetException, RangeSetException, ValueError):
        # Names that are not hostlist-friendly (IB descriptions with ';' '/' ...) are joined.
        return ",".join(sorted(names))
