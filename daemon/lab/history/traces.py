"""Read a job-history trace in any supported format (SWF, sacct JSON/-P, sacct-like CSV).

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "t.swf"
>>> _ = path.write_text("1 0 5 60 1 -1 -1 1 120 -1 1 7 1 -1 -1 -1 -1 -1\\n")
>>> [j.runtime_s for j in read_trace(path)]
[60.0]
"""
from __future__ import annotations

import logging
from pathlib import Path

from ...errors import ParseError
from .sacct import read_sacct_csv, read_sacct_json, read_sacct_parsable
from .swf import read_swf
from ...records import JobRecord

logger = logging.getLogger(__name__)

__all__ = ["FORMATS", "read_trace", "read_swf", "read_sacct_json", "read_sacct_parsable",
           "read_sacct_csv", "sniff_format"]

FORMATS = {
    "swf": read_swf,
    "sacct-json": read_sacct_json,
    "sacct-parsable": read_sacct_parsable,
    "sacct-csv": read_sacct_csv,
}


def sniff_format(text: str) -> str:
    """Guess the trace format from its first non-blank line."""
    head = text.lstrip()
    if head.startswith("{"):
        return "sacct-json"
    first = head.splitlines()[0] if head else ""
    if first.startswith(";") or (first and all(p.lstrip("-").replace(".", "", 1).isdigit()
                                               for p in first.split())):
        return "swf"
    if "|" in first:
        return "sacct-parsable"
    if "," in first:
        return "sacct-csv"
    raise ParseError("cannot tell the trace format (use --format)", line=1, part=first[:60])


def read_trace(path, format: str | None = None) -> list[JobRecord]:  # noqa: A002 - CLI name
    """Read ``path`` as ``format`` (one of :data:`FORMATS`; sniffed when None)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ParseError(f"cannot read trace: {error.strerror}", source=str(path)) from error
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        logger.warning("%s: not valid UTF-8 (first bad byte at offset %d); undecodable bytes replaced",
                       path, error.start)
        text = data.decode("utf-8", errors="replace")
    if format is None:
        try:
            format = sniff_format(text)  # noqa: A001
        except ParseError as error:
            raise ParseError("cannot tell the trace format (use --format)", source=str(path), line=1,
                             part=error.part) from error
    if format == "sacct":
        format = "sacct-parsable"  # noqa: A001
    reader = FORMATS.get(format)
    if reader is None:
        raise ParseError(f"unknown trace format (choose from {', '.join(FORMATS)})", source=str(path),
                         part=format)
    return reader(text, source=str(path))
