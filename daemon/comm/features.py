"""Class A/B/C features of one communication phase (seed 004, Tables 1-4).

Inputs are plain arrays: the phase's :class:`~hpcpredict.daemon.comm.patterns.Messages`, the
rank -> allocation-node index map, and for class C the allocation nodes' ancestor ids per
topology level (``Placement.encode(node_list)``: column 0 is the node's parent). Everything
is computed with ``bincount``/``unique`` over the message arrays, no Python loop per message.

"Traffic from X to the network" counts bytes/messages whose destination lies outside X;
"intra-X" counts traffic between different children of the same X (for the first level,
different nodes under the same switch/Aries). Statistics [min, avg, max] run over the nodes
(class B) or the level's components (class C) that the allocation uses, zeros included.

>>> import numpy as np
>>> from hpcpredict.daemon.comm.patterns import build_pattern
>>> m = build_pattern("halo3d", ntasks=8, message_bytes=100)
>>> f = class_b(m, np.repeat(np.arange(4), 2))
>>> f["ND_max"], f["iND_max"], f["TD"]
(400.0, 200.0, 1600.0)

:func:`phase_features` is what a request or a record becomes: every feature, and the switch
hops (``hops_max``) the lab's analytical baselines use (0 within a node, 2 (k + 1) when the
lowest common ancestor is at level k, 2 (L + 1) when none is shared).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .patterns import Messages
from ...topology.placement import Placement

CLASS_A = ("n", "ppn", "l", "PD", "PM")
_STATS = ("min", "avg", "max")
CLASS_B = tuple(f"{f}_{s}" for f in ("ND", "NM", "iND", "iNM") for s in _STATS) + ("TD", "TM")

# Per placement kind: feature prefix per level, names of the component counts and ratios
# (Tables 3 and 4); a generic topology.conf tree uses L1, L2, ... for its levels.
_KIND_PREFIX = {"infiniband": ("S", "R"), "dragonfly": ("A", "C", "G")}
_KIND_COUNTS = {"infiniband": {0: "sw", 1: "r"}, "dragonfly": {1: "c", 2: "g"}}
_KIND_RATIOS = {"infiniband": {0: "n/sw", 1: "sw/r"}, "dragonfly": {2: "c/g"}}


def _stats(values: np.ndarray, prefix: str, out: dict[str, float]) -> None:
    out[f"{prefix}_min"] = float(values.min()) if values.size else 0.0
    out[f"{prefix}_avg"] = float(values.mean()) if values.size else 0.0
    out[f"{prefix}_max"] = float(values.max()) if values.size else 0.0


_DENSE_PAIRS = 1 << 22    # dense node-pair table up to 2048 nodes (2 x 32 MiB transient)


@dataclass(frozen=True)
class NodeTraffic:
    """The phase's messages summed per (source node, destination node) pair.

    Every class B/C feature depends on the messages only through these sums, and a stencil
    on a block mapping has few distinct node pairs, so the levels' bincounts run over
    thousands of pairs instead of millions of messages.
    """

    src: np.ndarray      # allocation node index
    dst: np.ndarray
    data: np.ndarray     # bytes (float)
    count: np.ndarray    # messages (float)
    nnodes: int

    @classmethod
    def of(cls, messages: Messages, rank_node: np.ndarray) -> "NodeTraffic":
        nnodes = int(rank_node.max()) + 1
        src, dst = rank_node[messages.src], rank_node[messages.dst]
        if nnodes * nnodes > _DENSE_PAIRS:
            return cls(src, dst, messages.nbytes.astype(float), np.ones(src.size), nnodes)
        key = src * nnodes + dst
        count = np.bincount(key, minlength=nnodes * nnodes)
        data = np.bincount(key, weights=messages.nbytes, minlength=nnodes * nnodes)
        pairs = np.flatnonzero(count)
        return cls(pairs // nnodes, pairs % nnodes, data[pairs], count[pairs].astype(float), nnodes)


def _sums(group: np.ndarray, category: np.ndarray, traffic: NodeTraffic, ngroups: int):
    """Per group and category (0, 1; 2 = not counted): (data, messages) arrays (ngroups, 2)."""
    key = group * 3 + category
    data = np.bincount(key, weights=traffic.data, minlength=3 * ngroups).reshape(ngroups, 3)
    count = np.bincount(key, weights=traffic.count, minlength=3 * ngroups).reshape(ngroups, 3)
    return data, count


def class_a(messages: Messages, rank_node: np.ndarray) -> dict[str, float]:
    """n, ppn, l, PD, PM: what the user states (pattern, sizes, nodes, tasks per node)."""
    ntasks = messages.ntasks
    per_node = np.bincount(rank_node, minlength=int(rank_node.max()) + 1)
    pd = np.bincount(messages.src, weights=messages.nbytes, minlength=ntasks)
    pm = np.bincount(messages.src, minlength=ntasks)
    return {
        "n": float(per_node.size),
        "ppn": float(per_node.max()),
        "l": float(messages.nbytes.max()) if len(messages) else 0.0,
        "PD": float(pd.max()),
        "PM": float(pm.max()),
    }


def class_b(messages: Messages, rank_node: np.ndarray, traffic: NodeTraffic | None = None
            ) -> dict[str, float]:
    """ND/NM/iND/iNM [min, avg, max] over the allocation's nodes, TD/TM totals."""
    t = traffic or NodeTraffic.of(messages, rank_node)
    category = (t.src == t.dst).astype(np.int64)                 # 0 inter-node, 1 intra-node
    data, count = _sums(t.src, category, t, t.nnodes)
    out: dict[str, float] = {}
    for column, name in ((0, "N"), (1, "iN")):
        _stats(data[:, column], f"{name}D", out)
        _stats(count[:, column], f"{name}M", out)
    out["TD"] = float(data[:, 0].sum())
    out["TM"] = float(count[:, 0].sum())
    return out


def class_c_names(kind: str, levels: Sequence[str]) -> tuple[str, ...]:
    """Names of the class C features of a placement kind, in vector order."""
    prefixes = _level_prefixes(kind, levels)
    counts, ratios = _count_names(kind, len(levels))
    names = [counts[k] for k in sorted(counts)] + [ratios[k] for k in sorted(ratios)]
    for p in prefixes:
        for quantity in (f"{p}D", f"{p}M", f"i{p}D", f"i{p}M"):
            names.extend(f"{quantity}_{s}" for s in _STATS)
    if kind == "dragonfly":
        names += ["GGD_max", "GGM_max"]
    return tuple(names)


def _level_prefixes(kind: str, levels: Sequence[str]) -> tuple[str, ...]:
    prefixes = _KIND_PREFIX.get(kind)
    if prefixes is None or len(prefixes) != len(levels):
        return tuple(f"L{k + 1}" for k in range(len(levels)))
    return prefixes


def _count_names(kind: str, nlevels: int) -> tuple[dict[int, str], dict[int, str]]:
    if kind in _KIND_COUNTS and len(_KIND_PREFIX[kind]) == nlevels:
        return _KIND_COUNTS[kind], _KIND_RATIOS[kind]
    counts = {k: f"L{k + 1}" for k in range(nlevels)}
    ratios = {k: ("n" if k == 0 else f"L{k}") + f"/L{k + 1}" for k in range(nlevels)}
    return counts, ratios


def class_c(messages: Messages, rank_node: np.ndarray, ancestors: np.ndarray, kind: str,
            levels: Sequence[str], traffic: NodeTraffic | None = None) -> dict[str, float]:
    """Traffic per topology level: out of each component, and between its children.

    ``ancestors[i, k]`` is the id of allocation node ``i``'s level-``k`` component.
    """
    t = traffic or NodeTraffic.of(messages, rank_node)
    nnodes = t.nnodes
    if ancestors.shape[0] < nnodes or ancestors.shape[1] != len(levels):
        raise ValueError(f"ancestors has shape {ancestors.shape}, need ({nnodes}, {len(levels)})")
    prefixes = _level_prefixes(kind, levels)
    count_names, ratio_names = _count_names(kind, len(levels))
    child_src, child_dst = t.src, t.dst          # level -1 = the nodes themselves
    ncomponents = [nnodes]
    out: dict[str, float] = {}
    for k in range(len(levels)):
        _, local = np.unique(ancestors[:nnodes, k], return_inverse=True)
        local = local.reshape(-1)
        ncomp = int(local.max()) + 1
        ncomponents.append(ncomp)
        comp_src, comp_dst = local[t.src], local[t.dst]
        # 0: leaves the component; 1: between different children inside it; 2: neither
        category = np.where(comp_src != comp_dst, 0, np.where(child_src != child_dst, 1, 2))
        data, count = _sums(comp_src, category, t, ncomp)
        for column, name in ((0, prefixes[k]), (1, f"i{prefixes[k]}")):
            _stats(data[:, column], f"{name}D", out)
            _stats(count[:, column], f"{name}M", out)
        child_src, child_dst = comp_src, comp_dst
    for k, name in count_names.items():
        out[name] = float(ncomponents[k + 1])
    for k, name in ratio_names.items():
        out[name] = ncomponents[k] / ncomponents[k + 1]
    if kind == "dragonfly":
        ng = ncomponents[-1]
        between = child_src != child_dst
        pair = child_src[between] * ng + child_dst[between]
        out["GGD_max"] = float(np.bincount(pair, weights=t.data[between]).max()) if pair.size else 0.0
        out["GGM_max"] = float(np.bincount(pair, weights=t.count[between]).max()) if pair.size else 0.0
    return {name: out[name] for name in class_c_names(kind, levels)}


# Class C model inputs besides the relative features: the node bottleneck itself, the
# message size and counts (everything else enters relative to the node bottleneck).
RELATIVE_BASE = ("n", "ppn", "l", "PM", "ND_max", "NM_max")
RELATIVE_SUFFIX = "_rel"


def relative_features(row: dict[str, float]) -> dict[str, float]:
    """Every class B/C data (message) quantity divided by ND_max (NM_max): ``X_rel``.

    Why: the benchmark's random peers make the absolute volumes collinear (ND ~ ppn x PD, SD
    ~ ND x nodes per switch ...), so trees on raw volumes split on whichever comes first and
    misjudge structured patterns whose traffic stays local. Seen from the busiest node's NIC,
    "how much more does level k carry" transfers between patterns; measured on the SimGrid
    sweeps it roughly halves the class C MMRE (benchmarks/README.md, comm).

    >>> relative_features({"ND_max": 4.0, "NM_max": 2.0, "SD_max": 8.0, "SM_avg": 1.0, "sw": 3.0})
    {'SD_max_rel': 2.0, 'SM_avg_rel': 0.5}
    """
    data = max(row.get("ND_max", 0.0), 1.0)
    count = max(row.get("NM_max", 0.0), 1.0)
    out: dict[str, float] = {}
    for name, value in row.items():
        if name in RELATIVE_BASE or name in CLASS_A or name == "hops_max":
            continue
        head = name.split("_")[0]
        if head.endswith("D"):
            out[name + RELATIVE_SUFFIX] = value / data
        elif head.endswith("M"):
            out[name + RELATIVE_SUFFIX] = value / count
    return out


def class_c_model_candidates(names: Sequence[str]) -> tuple[str, ...]:
    """Inputs the class C model ranks: the base, component counts/ratios, the ``_rel`` set."""
    # counts and ratios (sw, n/sw, c/g, L1, n/L1, L1/L2 ...) are the names without a "_"
    # that are neither class A nor the class B totals
    counts = {n for n in names if "_" not in n and n not in CLASS_A and n not in ("TD", "TM")}
    return tuple(n for n in names if n in RELATIVE_BASE or n.endswith(RELATIVE_SUFFIX) or n in counts)


def feature_vector(messages: Messages, rank_node: np.ndarray, feature_class: str,
                   ancestors: np.ndarray | None = None, kind: str = "", levels: Sequence[str] = ()
                   ) -> dict[str, float]:
    """Class A, A+B, or A+B+C features as one ordered dict (class C needs ``ancestors``)."""
    out = class_a(messages, rank_node)
    traffic = NodeTraffic.of(messages, rank_node) if feature_class in ("B", "C") else None
    if feature_class in ("B", "C"):
        out.update(class_b(messages, rank_node, traffic))
    if feature_class == "C":
        if ancestors is None:
            raise ValueError("class C features need the allocation's ancestors")
        out.update(class_c(messages, rank_node, ancestors, kind, levels, traffic))
        out.update(relative_features(out))
    return out


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
