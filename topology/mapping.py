"""Process mapping: which node of the allocation each MPI rank runs on, as Slurm lays it out.

Follows Slurm's step layout (``src/common/slurm_step_layout.c``, the distributions that
``srun -m`` / ``--distribution`` selects; only the first, node-level part of ``block:cyclic``
matters here, socket/core parts and ``,Pack`` options are ignored):

* **Per-node task counts.** ``tasks_per_node`` is the allocation's per-node task count, as in
  ``SLURM_TASKS_PER_NODE`` (``4,2,1(x2)`` = 4,2,1,1); it must have ``node_count`` entries that
  sum to ``ntasks``. Without it, Slurm spreads ``ntasks`` evenly: every node gets
  ``ntasks // node_count`` and the first ``ntasks % node_count`` nodes one more (``-N3 -n7``
  gives ``3,2(x2)``). ``ntasks_per_node`` is a maximum: more tasks than
  ``node_count * ntasks_per_node`` is impossible.
* **block**: a node gets all its tasks before the next node gets any (ranks 0..c0-1 on node 0,
  the next c1 on node 1, ...).
* **cyclic**: round-robin over nodes; in pass ``j`` a node gets a task only while ``j`` is
  below its count (Slurm's ``_task_layout_cyclic`` with the counts as the CPU limit).
* **plane=N**: blocks of N consecutive ranks dealt round-robin over nodes; a node whose count
  is used up is skipped, a node with fewer than N left takes what it can
  (``_task_layout_plane``). Without counts every node takes whole blocks.
* **arbitrary**: ranks go where ``SLURM_HOSTFILE`` lists them; pass that as ``rank_nodes``
  (node index per rank). Without it the layout is unknown and we say so.

>>> map_ranks(2, 6, "block").tolist()
[0, 0, 0, 1, 1, 1]
>>> map_ranks(2, 6, "cyclic").tolist()
[0, 1, 0, 1, 0, 1]
>>> map_ranks(2, 6, "plane=2").tolist()
[0, 0, 1, 1, 0, 0]
>>> map_ranks(3, 7, "block", tasks_per_node="4,2,1").tolist()
[0, 0, 0, 0, 1, 1, 2]
>>> parse_tasks_per_node("4,2,1(x2)")
[4, 2, 1, 1]
"""
from __future__ import annotations

import logging
import re
from typing import Sequence

import numpy as np

from .errors import InvalidRequest

logger = logging.getLogger(__name__)

_TPN_ITEM = re.compile(r"^\s*(\d+)\s*(?:\(\s*x\s*(\d+)\s*\))?\s*$")
# More per-node counts than any allocation has nodes: refused before expanding `1(x2000000000)`.
MAX_NODES = 1_000_000
_PLANE = re.compile(r"^plane\s*=\s*(\d+)$", re.IGNORECASE)


def count_tasks_per_node(text: str) -> int:
    """How many nodes a ``SLURM_TASKS_PER_NODE`` value names, without expanding it.

    >>> count_tasks_per_node("4,2,1(x2)"), count_tasks_per_node("1(x2000000000)")
    (4, 2000000000)
    """
    total = 0
    for item in text.split(","):
        match = _TPN_ITEM.match(item)
        repeat = match.group(2) if match else None
        total += (int(repeat) if len(repeat) <= 15 else 10 ** 15) if repeat else 1
    return total


def parse_tasks_per_node(text: str) -> list[int]:
    """Expand Slurm's ``SLURM_TASKS_PER_NODE`` syntax (``4,2,1(x2)``) to one count per node."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("tasks_per_node", "empty per-node task count list")
    if count_tasks_per_node(text) > MAX_NODES:
        raise InvalidRequest("tasks_per_node", f"names more than {MAX_NODES} nodes: {text[:80]!r}")
    counts: list[int] = []
    for item in text.split(","):
        match = _TPN_ITEM.match(item)
        if not match:
            raise InvalidRequest("tasks_per_node", f"cannot read {item.strip()!r} in {text!r} "
                                 "(expected COUNT or COUNT(xREPEAT))")
        if len(match.group(1)) > 9:
            raise InvalidRequest("tasks_per_node", f"absurd task count in {item.strip()[:40]!r}")
        count, repeat = int(match.group(1)), int(match.group(2) or 1)
        if repeat < 1:
            raise InvalidRequest("tasks_per_node", f"repeat must be >= 1 in {item.strip()!r}")
        counts.extend([count] * repeat)
    return counts


def _distribution_kind(distribution: str) -> tuple[str, int]:
    """Node-level part of ``-m``: ("block"|"cyclic"|"plane"|"arbitrary", plane size)."""
    text = (distribution or "block").split(",")[0].strip()
    node_level = text.split(":")[0].strip().lower()
    if node_level in ("", "*", "block"):
        return "block", 0
    if node_level in ("cyclic", "arbitrary"):
        return node_level, 0
    match = _PLANE.match(node_level)
    if match:
        size = int(match.group(1))
        if size < 1:
            raise InvalidRequest("distribution", f"plane size must be >= 1 in {distribution!r}")
        return "plane", size
    raise InvalidRequest("distribution", f"unknown distribution {distribution!r} "
                         "(block, cyclic, plane=N or arbitrary)")


def _node_counts(node_count: int, ntasks: int, tasks_per_node, ntasks_per_node) -> np.ndarray | None:
    """Per-node task counts, or None when the layout decides them (even spread, plane)."""
    if tasks_per_node is not None:
        counts = parse_tasks_per_node(tasks_per_node) if isinstance(tasks_per_node, str) \
            else [int(c) for c in tasks_per_node]
        if len(counts) != node_count:
            raise InvalidRequest("tasks_per_node", f"{len(counts)} per-node counts for {node_count} nodes")
        if any(c < 0 for c in counts):
            raise InvalidRequest("tasks_per_node", "per-node task counts must be >= 0")
        if sum(counts) != ntasks:
            raise InvalidRequest("tasks_per_node", f"per-node counts sum to {sum(counts)}, not ntasks={ntasks}")
        if ntasks_per_node is not None and max(counts, default=0) > ntasks_per_node:
            raise InvalidRequest("tasks_per_node", f"a node has {max(counts)} tasks, more than "
                                 f"ntasks_per_node={ntasks_per_node}")
        return np.asarray(counts, dtype=np.int64)
    if ntasks < node_count:
        raise InvalidRequest("ntasks", f"{ntasks} tasks cannot use {node_count} nodes "
                             "(Slurm needs at least one task per node)")
    return None


def map_ranks(node_count: int, ntasks: int, distribution: str = "block",
              tasks_per_node: str | Sequence[int] | None = None,
              ntasks_per_node: int | None = None,
              rank_nodes: Sequence[int] | None = None) -> np.ndarray:
    """int32 array of length ``ntasks``: rank -> index (0..node_count-1) of its node."""
    if not isinstance(node_count, (int, np.integer)) or node_count < 1:
        raise InvalidRequest("node_count", f"must be a positive integer, got {node_count!r}")
    if not isinstance(ntasks, (int, np.integer)) or ntasks < 1:
        raise InvalidRequest("ntasks", f"must be a positive integer, got {ntasks!r}")
    if ntasks_per_node is not None:
        if ntasks_per_node < 1:
            raise InvalidRequest("ntasks_per_node", f"must be >= 1, got {ntasks_per_node}")
        if ntasks > node_count * ntasks_per_node:
            raise InvalidRequest("ntasks", f"{ntasks} tasks do not fit {node_count} nodes x "
                                 f"{ntasks_per_node} tasks per node")
    kind, plane = _distribution_kind(distribution)
    counts = _node_counts(node_count, ntasks, tasks_per_node, ntasks_per_node)

    if kind == "arbitrary":
        if rank_nodes is None:
            raise InvalidRequest("distribution", "arbitrary distribution needs the per-rank node "
                                 "list (SLURM_HOSTFILE order) as rank_nodes")
        ranks = np.asarray(rank_nodes, dtype=np.int64)
        if ranks.shape != (ntasks,):
            raise InvalidRequest("rank_nodes", f"{ranks.size} entries for {ntasks} tasks")
        if ranks.size and (ranks.min() < 0 or ranks.max() >= node_count):
            raise InvalidRequest("rank_nodes", f"node index out of range 0..{node_count - 1}")
        if counts is not None and not np.array_equal(np.bincount(ranks, minlength=node_count), counts):
            raise InvalidRequest("rank_nodes", "per-node task counts disagree with tasks_per_node")
        return ranks.astype(np.int32)

    if kind == "plane":
        return _plane(node_count, ntasks, plane, counts)
    if counts is None:  # Slurm's even spread
        counts = np.full(node_count, ntasks // node_count, dtype=np.int64)
        counts[: ntasks % node_count] += 1
    if kind == "block":
        return np.repeat(np.arange(node_count, dtype=np.int32), counts)
    return _cyclic(counts)


def _cyclic(counts: np.ndarray) -> np.ndarray:
    # Pass j visits, in node order, every node with count > j: sort (pass, node) pairs.
    node = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    passes = np.arange(node.size) - np.repeat(first, counts)
    order = np.lexsort((node, passes))
    return node[order].astype(np.int32)


def _plane(node_count: int, ntasks: int, size: int, counts: np.ndarray | None) -> np.ndarray:
    out = np.empty(ntasks, dtype=np.int32)
    if counts is None:
        # Whole blocks round-robin: rank r is in block r // size, which goes to node block % N.
        out[:] = (np.arange(ntasks) // size) % node_count
        return out
    left = counts.copy()
    rank = 0
    while rank < ntasks:  # at most ceil(max count / size) passes over the nodes
        for node in range(node_count):
            take = min(size, int(left[node]), ntasks - rank)
            if take:
                out[rank: rank + take] = node
                left[node] -= take
                rank += take
    return out
