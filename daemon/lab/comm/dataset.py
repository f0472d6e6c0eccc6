"""Records + placement -> feature matrices (one row per record).

Each row is :func:`~hpcpredict.daemon.comm.features.phase_features` of the record's phase,
the same function the served models use on a request, so training and serving see the same
columns (``hops_max`` included: the analytical baselines' input that is not a paper feature).

>>> from hpcpredict.topology.placement import Placement
>>> from hpcpredict.daemon.comm.records import CommRecord
>>> p = Placement("infiniband", ("switch", "rack"), {"a": ("s1", "r1"), "b": ("s2", "r1")})
>>> r = CommRecord(pattern="halo3d", ntasks=2, message_bytes=8, nodes="a,b", time_s=1.0)
>>> row = record_features(r, p)
>>> row["SD_max"], row["iRD_max"], row["hops_max"]
(8.0, 16.0, 4.0)
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...comm.features import phase_features
from ...comm.records import CommRecord, record_messages
from ....topology.placement import Placement


def record_features(record: CommRecord, placement: Placement | None) -> dict[str, float]:
    nodes = record.node_list()
    return phase_features(record_messages(record), record.rank_nodes(len(nodes)), nodes, placement)


def feature_table(records: Sequence[CommRecord], placement: Placement | None
                  ) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """(X, column names, measured times) for ``records``; every row has the same columns."""
    rows = [record_features(r, placement) for r in records]
    names = tuple(rows[0])
    X = np.array([[row[name] for name in names] for row in rows], dtype=float)
    y = np.array([r.time_s for r in records], dtype=float)
    return X, names, y
