"""Site mapping files: what a site knows that the fabric does not tell (rack of a leaf
switch, dragonfly group of a Cray cabinet).

One entry per line, ``KEY VALUE``: the value is the last whitespace-separated word, the key
is everything before it (so IB switch descriptions with spaces work); a key in double quotes
may also contain ``#``. A key that is a hostlist expression (``c0-0,c1-0`` or ``node[001-016]``) stands for
every name in it; if it is not one (``MF0;ib-leaf01:MSB7800/U1``) it is taken literally.
``#`` starts a comment. The ALCF Theta table (``c0-0,c1-0    0``) is a valid site map.

>>> parse_site_map("c0-0,c1-0  0\\n# comment\\nc2-0,c3-0 1\\n")
{'c0-0': '0', 'c1-0': '0', 'c2-0': '1', 'c3-0': '1'}
"""
from __future__ import annotations

import logging

from .errors import ParseError

from .hostlist import expand

logger = logging.getLogger(__name__)


def parse_site_map(text: str, source: str = "site map") -> dict[str, str]:
    mapping: dict[str, str] = {}
    where: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith('"') and '"' in stripped[1:]:   # "KEY with # or spaces" VALUE
            close = stripped.index('"', 1)
            key, rest = stripped[1:close], stripped[close + 1:].split("#", 1)[0].split()
            if len(rest) != 1 or not key:
                raise ParseError("expected '\"KEY\" VALUE'", source=source, line=number, part=raw)
            value = rest[0]
        else:
            line = stripped.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.rsplit(None, 1)
            if len(parts) != 2:
                raise ParseError("expected 'KEY VALUE'", source=source, line=number, part=raw)
            key, value = parts[0].strip(), parts[1].strip()
        try:
            keys = expand(key, source=source, line=number)
        except ParseError:
            keys = [key]
        for name in keys:
            if name in mapping and mapping[name] != value:
                raise ParseError(f"{name!r} is mapped to {mapping[name]!r} at line {where[name]} "
                                 f"and to {value!r}", source=source, line=number, part=raw)
            mapping[name], where[name] = value, number
    if not mapping:
        raise ParseError("no entries", source=source)
    return mapping
