"""Typing of user-written values: the one rule shared by script inputs and runtime features.

Numbers become ``float`` (finite ones only), ``true/false/yes/no/on/off`` become ``bool``,
anything else stays a (length-bounded) string.

>>> coerce_value("400"), coerce_value("1e3"), coerce_value("yes"), coerce_value("cg")
(400.0, 1000.0, True, 'cg')
"""
from __future__ import annotations

import math
import re

MAX_VALUE_CHARS = 256
MAX_KEY_CHARS = 64
_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off"})
# A plain decimal or exponent number; anchored and without nested quantifiers (linear time).
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.:@-]*")

Value = float | str | bool


def coerce_value(text: str) -> Value:
    """Type one value as the inputs dictionary stores it (see module docstring)."""
    text = text.strip()[:MAX_VALUE_CHARS]
    if len(text) <= 40 and _NUMBER.fullmatch(text):
        number = float(text)
        if math.isfinite(number):
            return number
        return text
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    return text


def valid_key(key: str) -> bool:
    """A key is an identifier-like word of at most 64 characters (dots, colons, dashes allowed)."""
    return 0 < len(key) <= MAX_KEY_CHARS and _KEY.fullmatch(key) is not None


def normalise_key(key: str) -> str:
    """Option names become keys: leading dashes dropped, inner dashes become underscores."""
    return key.lstrip("-").replace("-", "_")
