"""Run tables: one row per run of an application (inputs, runtime, repetition), read from CSV.

Columns: the application's inputs (numeric or categorical, named as its parameters), the
target runtime column, an optional ``rep`` column (repetition number of the same
configuration), optional runtime-feature report times ``<feature>@t`` (seconds since the
start when ``<feature>`` was reported), and annotations (``config`` and any column whose name
starts with ``_``, e.g. ``_wall_s``), which are not inputs. Rows with the same input values are one
*configuration*; evaluation splits by configuration. ``derived`` (:class:`~.derived.DerivedInputs`)
adds inputs computed from the columns (after them, in order); a model fitted on the table keeps
the expressions and computes them for the jobs it estimates.

>>> table = parse_runs_csv("n,solver,rep,runtime\\n10,cg,0,1.5\\n10,cg,1,1.7\\n20,gmres,0,4\\n", target="runtime")
>>> table.inputs, table.y.tolist(), table.groups.tolist()
(['n', 'solver'], [1.5, 1.7, 4.0], [0, 0, 1])
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import ParseError
from ...runtime.derived import DerivedInputs
from ...runtime.values import Value, coerce_value

MAX_ROWS = 1_000_000
RESERVED = ("rep", "config")
USER_COLUMN = "_user"   # an annotation (not an input): whose run it is (`train-runtime --from-store`)


@dataclass(frozen=True)
class RunTable:
    inputs: list[str]                 # input column names (numeric or categorical)
    rows: list[dict[str, Value]]      # input values per run
    y: np.ndarray                     # target runtime per run (seconds, > 0)
    groups: np.ndarray                # configuration id per run
    report_times: dict[str, np.ndarray]  # feature -> seconds since start when reported (NaN unknown)
    derived: DerivedInputs | None = None  # inputs computed from the others (already in ``rows``)
    users: np.ndarray | None = None   # whose run each row is (the ``_user`` annotation), None: not known

    def matrix_rows(self, columns: list[str]) -> list[dict[str, Value]]:
        return [{c: row[c] for c in columns if c in row} for row in self.rows]


def parse_runs_csv(text: str, *, target: str, source: str = "CSV", derived: DerivedInputs | None = None) -> RunTable:
    """Parse a run table; raises :class:`ParseError` naming the line and column."""
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise ParseError("empty file", source=source) from None
    header = [h.strip() for h in header]
    if target not in header:
        raise ParseError(f"no target column {target!r} (columns: {', '.join(header)})", source=source, line=1)
    if len(set(header)) != len(header):
        raise ParseError("duplicate column names", source=source, line=1)
    time_columns = {h[:-2]: h for h in header if h.endswith("@t")}
    inputs = [h for h in header if h != target and h not in RESERVED and not h.endswith("@t")
              and h and not h.startswith("_")]
    rows: list[dict[str, Value]] = []
    ys: list[float] = []
    config_labels: list[str] = []
    run_users: list[str] = []
    times: dict[str, list[float]] = {name: [] for name in time_columns}
    for number, record in enumerate(reader, 2):
        if not record or all(not cell.strip() for cell in record):
            continue
        if len(rows) >= MAX_ROWS:
            raise ParseError(f"more than {MAX_ROWS} rows", source=source, line=number)
        if len(record) != len(header):
            raise ParseError(f"{len(record)} fields, header has {len(header)}", source=source, line=number)
        cells = dict(zip(header, (c.strip() for c in record)))
        value = coerce_value(cells[target])
        if not isinstance(value, float) or isinstance(value, bool) or value <= 0:
            raise ParseError(f"target {target} must be a positive number", source=source, line=number,
                             part=cells[target])
        ys.append(value)
        config_labels.append(cells.get("config", ""))
        run_users.append(cells.get(USER_COLUMN, ""))
        rows.append({name: coerce_value(cells[name]) for name in inputs if cells[name] != ""})
        for name, column in time_columns.items():
            at = coerce_value(cells[column]) if cells[column] else math.nan
            times[name].append(at if isinstance(at, float) and not isinstance(at, bool) else math.nan)
    if not rows:
        raise ParseError("no data rows", source=source)
    if derived:
        clash = sorted(set(derived.names) & set(header))
        if clash:
            raise ParseError(f"derived inputs named like columns: {', '.join(clash)}", source=source, line=1)
        unknown = sorted({name for names in derived.sources.values() for name in names}
                         - set(inputs) - set(derived.names))
        if unknown:
            raise ParseError(f"derived inputs read inputs that are not columns: {', '.join(unknown)}", source=source)
    # A configuration is what the user chose: the `config` column when given, else the input
    # values without runtime features (those differ between repetitions of one configuration).
    keys: dict[tuple, int] = {}
    labels: list[tuple]
    if "config" in header:
        labels = [(cells,) for cells in config_labels]
    else:
        labels = [tuple(sorted((k, str(v)) for k, v in row.items() if k not in time_columns)) for row in rows]
    groups = np.array([keys.setdefault(label, len(keys)) for label in labels])
    if derived:
        rows = [derived.apply(row) for row in rows]
        inputs = inputs + derived.names
    return RunTable(inputs, rows, np.asarray(ys, dtype=float), groups,
                    {name: np.asarray(v, dtype=float) for name, v in times.items()}, derived or None,
                    np.asarray(run_users, dtype=str) if USER_COLUMN in header else None)


def read_runs_csv(path: Path, *, target: str, derived: DerivedInputs | None = None) -> RunTable:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise ParseError(f"cannot read: {error.strerror}", source=str(path)) from error
    return parse_runs_csv(text, target=target, source=str(path), derived=derived)
