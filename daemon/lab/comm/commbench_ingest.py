"""contrib/commbench raw output (one JSON object per line) -> :class:`CommRecord` rows.

>>> line = ('{"pattern": "benchmark", "ntasks": 2, "message_bytes": 16, "peers": 1, "seed": 5,'
...         ' "iterations": 10, "nodes": ["b", "a"], "rank_nodes": [0, 1], "time_s": 2e-06}')
>>> r = ingest_lines([line])[0]
>>> r.nodes, r.rank_node_list, r.source
('a,b', '1 0', 'mpi')
"""
from __future__ import annotations

import json
from typing import Iterable

from ...comm.records import CommRecord
from ...errors import ParseError

_REQUIRED = ("pattern", "ntasks", "message_bytes", "peers", "seed", "nodes", "rank_nodes", "time_s")


def ingest_lines(lines: Iterable[str], source: str = "<commbench>") -> list[CommRecord]:
    from ClusterShell.NodeSet import NodeSet

    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as error:
            raise ParseError(f"not JSON: {error}", source=source, line=number, part=line[:60]) from error
        missing = [k for k in _REQUIRED if k not in raw]
        if missing:
            raise ParseError(f"missing keys {missing}", source=source, line=number)
        try:
            names = [str(n) for n in raw["nodes"]]
            ordered = list(NodeSet.fromlist(names))            # records use hostlist (sorted) order
            index = {name: ordered.index(name) for name in names}
            rank_nodes = [index[names[int(i)]] for i in raw["rank_nodes"]]
            if len(rank_nodes) != int(raw["ntasks"]):
                raise ValueError(f"{len(rank_nodes)} rank_nodes for ntasks={raw['ntasks']}")
            if raw.get("delivered", True) is not True:   # absent in raw files that predate the check
                raise ValueError("its messages did not arrive intact (delivered: false): not a measurement")
            time_s = float(raw["time_s"])
            if not time_s > 0:
                raise ValueError(f"time_s must be > 0, got {time_s}")
            records.append(CommRecord(
                pattern=str(raw["pattern"]), ntasks=int(raw["ntasks"]),
                message_bytes=int(raw["message_bytes"]), nodes=str(NodeSet.fromlist(ordered)),
                time_s=time_s, peers=int(raw["peers"]),
                seed=int(raw["seed"]), rank_node_list=" ".join(map(str, rank_nodes)),
                source="mpi", iterations=int(raw.get("iterations", 1))))
        except (ValueError, TypeError, IndexError, KeyError) as error:
            raise ParseError(f"bad benchmark record: {error}", source=source, line=number) from error
    if not records:
        raise ParseError("no benchmark records", source=source)
    return records
