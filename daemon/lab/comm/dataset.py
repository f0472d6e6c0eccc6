"""Records + placement -> feature matrices (one row per record).

Also computes the inputs of the analytical baselines that are not paper features:
``hops_max`` (max over ranks of the summed switch hops of its messages, from the placement:
0 within a node, 2 (k + 1) when the lowest common ancestor is at level k, 2 (L + 1) when
none is shared).

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

from ...comm.features import feature_vector
from ...comm.patterns import Messages
from ...comm.records import CommRecord, record_messages
from ....topology.placement import Placement


def hops_max(messages: Messages, rank_node: np.ndarray, ancestors: np.ndarray) -> float:
    src_anc = ancestors[rank_node[messages.src]]
    dst_anc = ancestors[rank_node[messages.dst]]
    nlevels = ancestors.shape[1]
    same = src_anc == dst_anc                                      # (M, L)
    # first level where the ancestors agree (nlevels when none does)
    common = np.where(same.any(axis=1), same.argmax(axis=1), nlevels)
    hops = 2.0 * (common + 1)
    hops[rank_node[messages.src] == rank_node[messages.dst]] = 0.0
    return float(np.bincount(messages.src, weights=hops, minlength=messages.ntasks).max())


def phase_features(messages: Messages, rank_node: np.ndarray, node_list: Sequence[str] | None,
                   placement: Placement | None) -> dict[str, float]:
    """All features of one phase: class A+B, and class C + hops when the placement is given."""
    if placement is None or node_list is None:
        return feature_vector(messages, rank_node, "B")
    ancestors = placement.encode(list(node_list))
    row = feature_vector(messages, rank_node, "C", ancestors, placement.kind, placement.levels)
    row["hops_max"] = hops_max(messages, rank_node, ancestors)
    return row


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
