"""Benchmark/measurement records: one CSV row per measured communication phase.

The real MPI benchmark (``contrib/commbench``) and the SimGrid generator write the same
columns, so training and evaluation read both the same way. A row holds everything needed to
rebuild the phase's messages (pattern, sizes, grid, peers, seed), the allocation's node list
(in Slurm's order), the process mapping (distribution + per-node counts, or the explicit
rank -> node list) and the measured phase time (max over ranks of the per-rank 3rd quartile).

>>> r = CommRecord(pattern="halo3d", ntasks=4, message_bytes=64, nodes="n[1-2]",
...                tasks_per_node="2(x2)", time_s=1e-5)
>>> r.node_list(), r.rank_nodes().tolist()
(['n1', 'n2'], [0, 0, 1, 1])
"""
from __future__ import annotations

import csv
import dataclasses
import io
import os
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ..errors import HpcPredictError, ParseError

FIELDS = ("source", "fabric", "shape", "background", "pattern", "ntasks", "message_bytes",
          "peers", "grid", "seed", "nodes", "distribution", "tasks_per_node", "rank_node_list",
          "iterations", "time_s")
_INT_FIELDS = {"background", "ntasks", "message_bytes", "peers", "seed", "iterations"}


@dataclass(frozen=True)
class CommRecord:
    pattern: str
    ntasks: int
    message_bytes: int
    nodes: str                    # hostlist expression, Slurm order after expansion
    time_s: float
    peers: int = 0
    grid: str = ""                # "4x2x2" or "" (MPI_Dims_create)
    seed: int = 0
    distribution: str = "block"
    tasks_per_node: str = ""      # SLURM_TASKS_PER_NODE form
    rank_node_list: str = ""      # explicit rank -> node index ("0 0 1 1"), overrides the above
    source: str = "mpi"           # "mpi" (measured) or "simgrid" (simulated)
    fabric: str = ""
    shape: str = ""
    background: int = 0
    iterations: int = 1

    def node_list(self) -> list[str]:
        from ClusterShell.NodeSet import NodeSet, NodeSetParseError

        try:
            return list(NodeSet(self.nodes))
        except NodeSetParseError as error:
            raise ParseError(f"bad node list: {error}", part=self.nodes) from error

    def grid_tuple(self) -> tuple[int, ...]:
        if not self.grid:
            return ()
        try:
            return tuple(int(x) for x in self.grid.split("x"))
        except ValueError as error:
            raise ParseError("bad grid (expected e.g. 4x2x2)", part=self.grid) from error

    def rank_nodes(self, node_count: int | None = None) -> np.ndarray:
        """Rank -> allocation node index."""
        from ...topology.mapping import map_ranks

        if node_count is None:
            node_count = len(self.node_list())
        if self.rank_node_list:
            try:
                ranks = np.array(self.rank_node_list.split(), dtype=np.int64)
            except ValueError as error:
                raise ParseError("bad rank_node_list", part=self.rank_node_list[:40]) from error
            if ranks.size != self.ntasks or ranks.min() < 0 or ranks.max() >= node_count:
                raise ParseError(f"rank_node_list must give {self.ntasks} node indices < {node_count}")
            return ranks
        return map_ranks(node_count, self.ntasks, self.distribution,
                         tasks_per_node=self.tasks_per_node or None).astype(np.int64)


def write_records(path: str | os.PathLike, records: Iterable[CommRecord], append: bool = False) -> None:
    exists = append and os.path.exists(path) and os.path.getsize(path) > 0
    with open(path, "a" if append else "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        if not exists:
            writer.writeheader()
        for record in records:
            writer.writerow(dataclasses.asdict(record))


def read_records(path: str | os.PathLike) -> list[CommRecord]:
    """Parse a records CSV; a bad row raises :class:`ParseError` naming file, line and column."""
    try:
        with open(path, newline="", encoding="utf-8") as stream:
            text = stream.read()
    except OSError as error:
        raise ParseError(f"cannot read records: {error.strerror}", source=str(path)) from error
    reader = csv.DictReader(io.StringIO(text))
    missing = {"pattern", "ntasks", "message_bytes", "nodes", "time_s"} - set(reader.fieldnames or ())
    if missing:
        raise ParseError(f"missing columns {sorted(missing)}", source=str(path), line=1)
    records = []
    for row in reader:
        kwargs: dict[str, Any] = {}   # each field parsed to its own type (int, float or str)
        for key in FIELDS:
            value = row.get(key)
            if value is None or value == "":
                continue
            try:
                if key in _INT_FIELDS:
                    kwargs[key] = int(value)
                elif key == "time_s":
                    kwargs[key] = float(value)
                else:
                    kwargs[key] = value
            except ValueError as error:
                raise ParseError(f"bad {key}", source=str(path), line=reader.line_num, part=value) from error
        try:
            record = CommRecord(**kwargs)
        except TypeError as error:
            raise ParseError(f"incomplete row: {error}", source=str(path), line=reader.line_num) from error
        if not record.time_s > 0:
            raise ParseError("time_s must be > 0", source=str(path), line=reader.line_num, part=row["time_s"])
        records.append(record)
    if not records:
        raise ParseError("no records", source=str(path))
    return records


def record_messages(record: CommRecord):
    """Rebuild the phase's messages from a record."""
    from .patterns import build_pattern

    try:
        return build_pattern(record.pattern, record.ntasks, record.message_bytes,
                             grid=record.grid_tuple(), peers=record.peers, seed=record.seed)
    except HpcPredictError as error:
        raise ParseError(f"record does not describe a valid phase: {error}") from error
