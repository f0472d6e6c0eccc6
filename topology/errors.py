"""The base of the product's one exception hierarchy, and the errors the parsers raise.

This lives in ``topology/`` because it is the lowest layer: the daemon imports topology, never
the other way round. :mod:`hpcpredict.daemon.errors` re-exports every class here and adds the
daemon's own (config, command, model artifact, store), all subclasses of
:class:`HpcPredictError`, so ``except HpcPredictError`` catches either layer's errors and the
CLI's one error table covers both.

>>> str(ParseError("not a port line", source="ibnetdiscover.txt", line=7, part="[1x]"))
"ibnetdiscover.txt:7: not a port line: '[1x]'"
"""
from __future__ import annotations


class HpcPredictError(Exception):
    """Base of every error this product raises on purpose."""


class ParseError(HpcPredictError):
    """Text from a tool or a user could not be parsed.

    ``source`` names the file or stream, ``line`` the 1-based line number (0 when unknown),
    ``part`` the offending fragment.
    """

    def __init__(self, message: str, *, source: str = "", line: int = 0, part: str = ""):
        self.source, self.line, self.part = source, line, part
        where = source
        if line:
            where = f"{where}:{line}" if where else f"line {line}"
        text = f"{where}: {message}" if where else message
        if part:
            text = f"{text}: {part!r}"
        super().__init__(text)


class InvalidRequest(HpcPredictError):
    """A request field is out of range or malformed; ``field`` names it."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


class InvalidTopology(HpcPredictError):
    """A topology description parses but means something impossible (node under two leaves...)."""


class UnknownNode(InvalidTopology):
    """A node name is not in the placement model."""
