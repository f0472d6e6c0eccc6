"""Durations as people and Slurm write them: the one formatter of seconds in the Python code.

The explanation lines, the CLI and node-count tables all format through here. (The Lua hook
and the stdlib-only prolog/epilog scripts in ``slurm_plugin/`` keep their own copy: they must
not import the daemon.)
"""
from __future__ import annotations

import math
import re

from .errors import InvalidRequest


# One rule for the unit of a duration people read: below 2 min in seconds, below 2 h in
# minutes, below 3 days in hours, then days.
_UNITS = ((120.0, 1.0, "s"), (7200.0, 60.0, "min"), (3 * 86400.0, 3600.0, "h"), (math.inf, 86400.0, "d"))


def _unit(seconds: float) -> tuple[float, str]:
    return next((size, name) for limit, size, name in _UNITS if seconds < limit)


def human(seconds: float) -> str:
    """``human(150) == '2.5 min'``, ``human(7300) == '2.0 h'``; ``'?'`` for no duration.

    >>> human(42), human(150), human(7300), human(4 * 86400), human(-1)
    ('42 s', '2.5 min', '2.0 h', '4.0 d', '?')
    """
    if seconds < 0 or not math.isfinite(seconds):
        return "?"
    size, name = _unit(seconds)
    return f"{seconds:.0f} s" if name == "s" else f"{seconds / size:.1f} {name}"


def human_range(low: float, high: float) -> str:
    """A range in one unit when both ends share it (whole seconds and minutes, tenths of hours
    and days), else each end in its own; one value when both ends read the same.

    >>> human_range(2460, 3480), human_range(30, 150), human_range(9000, 10800), human_range(600, 610)
    ('41–58 min', '30 s–2 min', '2.5–3.0 h', '10 min')
    """
    def text(seconds: float) -> tuple[str, str]:
        size, name = _unit(seconds)
        return (f"{seconds / size:.0f}" if name in ("s", "min") else f"{seconds / size:.1f}"), name

    (low_text, low_unit), (high_text, high_unit) = text(low), text(high)
    if low_unit != high_unit:
        return f"{low_text} {low_unit}–{high_text} {high_unit}"
    return f"{high_text} {high_unit}" if low_text == high_text else f"{low_text}–{high_text} {high_unit}"


def clock(seconds: float) -> str:
    """Seconds as a clock reading ``H:MM:SS`` (rounded to the second), for tables.

    >>> clock(3725.4), clock(59.6)
    ('1:02:05', '0:01:00')
    """
    hours, rest = divmod(int(round(seconds)), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def slurm_time(seconds: float) -> str:
    """Seconds → Slurm's ``[D-]HH:MM:SS``, rounded up to the minute (Slurm limits are minutes)."""
    minutes = max(1, math.ceil(seconds / 60))
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:02d}:{mins:02d}:00"


_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def parse_slurm_time(text: str, field: str = "time") -> int:
    """Slurm's time formats → seconds: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``.

    ``UNLIMITED``/``INFINITE`` give 0 (no limit).
    """
    value = text.strip()
    if value.upper() in ("UNLIMITED", "INFINITE", ""):
        return 0
    match = _SLURM_TIME.match(value)
    if not match:
        raise InvalidRequest(field, f"not a Slurm time: {text!r}")
    days, first, second, third = match.groups()
    if days is not None:
        hours, minutes, secs = int(first), int(second or 0), int(third or 0)
        return ((int(days) * 24 + hours) * 60 + minutes) * 60 + secs
    if third is not None:
        return (int(first) * 60 + int(second)) * 60 + int(third)
    if second is not None:
        return int(first) * 60 + int(second)
    return int(first) * 60
