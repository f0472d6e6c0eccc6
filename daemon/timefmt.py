"""Durations as people and Slurm write them."""
from __future__ import annotations

import math
import re

from hpcpredict.daemon.errors import InvalidRequest


def human(seconds: float) -> str:
    """``human(150) == '2.5 min'``, ``human(7300) == '2.0 h'``."""
    if seconds < 0 or not math.isfinite(seconds):
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def human_range(low: float, high: float) -> str:
    """``human_range(2460, 3480) == '41–58 min'``: one unit for both ends."""
    if high < 120:
        return f"{low:.0f}–{high:.0f} s"
    if high < 7200:
        return f"{low / 60:.0f}–{high / 60:.0f} min"
    if high < 3 * 86400:
        return f"{low / 3600:.1f}–{high / 3600:.1f} h"
    return f"{low / 86400:.1f}–{high / 86400:.1f} d"


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
