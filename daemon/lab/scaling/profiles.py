"""Parsers for APMT inputs: ``perf stat -x,`` counter files and per-call MPI profiles.

perf stat CSV (``perf stat -x, -e EVENTS cmd``, perf 6.x): ``value,unit,event,run-time,
percent-running,metric,metric-unit``; ``<not supported>`` / ``<not counted>`` values mean the
counter could not be read (e.g. in a VM without a PMU) and are kept as ``None``.

MPI profile CSV (mpiP-like aggregate per call, written by our benchmark program from its own
MPI_Wtime timers): a header ``call,count,bytes,time_s`` and one row per MPI call name, totals
over all ranks.

>>> c = parse_perf_stat(["1.64,msec,task-clock,1640357,100.00,0.436,CPUs utilized",
...                      "<not supported>,,cycles,0,100.00,,"])
>>> c.counters["task-clock"], c.counters["cycles"]
(0.00164, None)
>>> parse_mpi_profile(["call,count,bytes,time_s", "MPI_Allreduce,10,80,0.5"])[0].call
'MPI_Allreduce'
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ...errors import ParseError

UNSUPPORTED = ("<not supported>", "<not counted>")
# Units perf prints for software counters, converted to seconds.
_TIME_UNITS = {"msec": 1e-3, "usec": 1e-6, "nsec": 1e-9, "sec": 1.0, "ns": 1e-9}


@dataclass(frozen=True)
class PerfCounters:
    """Counter name (without :u/:k modifiers) -> value; time counters in seconds; None = unreadable."""

    counters: Mapping[str, float | None] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        return self.counters.get(name)

    @property
    def unsupported(self) -> list[str]:
        return sorted(k for k, v in self.counters.items() if v is None)


def _event_name(raw: str) -> str:
    name = raw.strip()
    if ":" in name and not name.startswith(("cpu/", "r")):
        base, _, mods = name.rpartition(":")
        if mods and set(mods) <= set("ukhGHpPS"):
            name = base
    return name


def parse_perf_stat(lines: Iterable[str], *, source: str = "") -> PerfCounters:
    counters: dict[str, float | None] = {}
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        fields = next(csv.reader([text]))
        if len(fields) < 3:
            raise ParseError("expected perf stat -x, fields value,unit,event,...", source=source,
                             line=number, part=text[:60])
        value_text, unit, event = fields[0].strip(), fields[1].strip(), _event_name(fields[2])
        if not event:
            raise ParseError("empty event name", source=source, line=number, part=text[:60])
        if value_text in UNSUPPORTED:
            counters[event] = None
            continue
        try:
            value = float(value_text)
        except ValueError as error:
            raise ParseError("counter value is not a number", source=source, line=number,
                             part=value_text) from error
        if not math.isfinite(value) or value < 0:
            raise ParseError("counter value must be finite and >= 0", source=source, line=number,
                             part=value_text)
        if unit in _TIME_UNITS:
            value *= _TIME_UNITS[unit]
        elif event == "duration_time" and unit in ("", "ns"):
            value *= 1e-9
        counters[event] = value
    if not counters:
        raise ParseError("no counters found", source=source)
    return PerfCounters(counters)


@dataclass(frozen=True)
class MpiCall:
    call: str
    count: int
    bytes: float
    time_s: float


P2P_CALLS = frozenset({"MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", "MPI_Wait",
                       "MPI_Waitall", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Probe"})


def parse_mpi_profile(lines: Iterable[str], *, source: str = "") -> list[MpiCall]:
    rows = [r for r in csv.reader(line for line in lines if line.strip() and not line.startswith("#"))]
    if not rows:
        raise ParseError("empty MPI profile", source=source)
    header = [h.strip() for h in rows[0]]
    expected = ["call", "count", "bytes", "time_s"]
    if header != expected:
        raise ParseError(f"header must be {','.join(expected)}", source=source, line=1, part=",".join(header))
    calls = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 4:
            raise ParseError("expected 4 fields", source=source, line=number, part=",".join(row))
        name = row[0].strip()
        if not name.startswith("MPI_"):
            raise ParseError("call name must start with MPI_", source=source, line=number, part=name)
        try:
            count, size, seconds = int(row[1]), float(row[2]), float(row[3])
        except ValueError as error:
            raise ParseError("count, bytes and time_s must be numbers", source=source, line=number,
                             part=",".join(row)) from error
        if count < 0 or size < 0 or seconds < 0 or not (math.isfinite(size) and math.isfinite(seconds)):
            raise ParseError("negative or non-finite value", source=source, line=number, part=",".join(row))
        calls.append(MpiCall(name, count, size, seconds))
    return calls


def parse_function_times(lines: Iterable[str], *, source: str = "") -> dict[str, float]:
    """Per-function CPU seconds from the ``# function,seconds`` block our profile ends with."""
    functions: dict[str, float] = {}
    inside = False
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if text == "# function,seconds":
            inside = True
            continue
        if inside and text.startswith("#"):
            name, _, value = text[1:].strip().partition(",")
            try:
                functions[name.strip()] = float(value)
            except ValueError as error:
                raise ParseError("function seconds must be a number", source=source, line=number,
                                 part=text) from error
    return functions
