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

from .errors import ParseError


# The most names one expression may stand for. ClusterShell builds every index of a range
# before anything can count them, so `n[0-99999999]` (14 bytes) would take gigabytes:
# count first, from the text, and refuse beyond this.
MAX_NAMES = 1_000_000

_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_RANGE_ITEM = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?(?:/\s*(\d+)\s*)?$")
_HUGE = 10 ** 15  # what a number too long to be an index counts as (never int() a huge digit run)


def _index(text: str | None, default: int) -> int:
    if text is None:
        return default
    # Padding is not size: ClusterShell reads `0000000099999999` as 99999999 (kept 16 wide).
    digits = text.lstrip("0") or "0"
    return int(digits) if len(digits) <= 15 else _HUGE


def count(expression: str) -> int:
    """How many names ``expression`` stands for, computed from its text without expanding it.

    An upper bound: overlapping ranges count twice (exact for Slurm's own folded lists), a
    malformed range counts as 1 and is left for :func:`expand` to report, and digit runs too
    long to be an index (leading zeros aside) count as 10**15 (Python refuses to ``int()`` very long digit strings).

    >>> count("n[001-016,020],gpu[1-4]-ib[0-1]"), count("n[0-99999999]")
    (25, 100000000)
    >>> count("n[0000000000000000-0000000099999999]")   # zero padding does not hide the size
    100000000
    """
    total, depth, item = 0, 0, []
    for char in expression + ",":  # split on commas outside brackets
        depth += (char == "[") - (char == "]")
        if char != "," or depth > 0:
            item.append(char)
            continue
        names = 1
        for group in _BRACKET.findall("".join(item)):
            size = 0
            for part in group.split(","):
                match = _RANGE_ITEM.match(part)
                if not match:
                    size += 1
                    continue
                low, high = _index(match[1], 0), _index(match[2], _index(match[1], 0))
                if _HUGE in (low, high) and match[2] is not None and \
                        match[1].lstrip("0") != match[2].lstrip("0"):
                    size += _HUGE   # two bounds too long to read are still a range, not one name
                    continue
                size += max(0, abs(high - low) // max(_index(match[3], 1), 1) + 1)
            names *= max(size, 1)
        total += names
        item = []
    return total


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
    names_named = count(expression)
    if names_named > MAX_NAMES:
        raise ParseError(f"hostlist expression names {names_named} hosts, more than the limit {MAX_NAMES}",
                         source=source, line=line, part=expression[:80])
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
