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
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from hpcpredict.daemon.comm.patterns import Messages

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


def class_b(messages: Messages, rank_node: np.ndarray) -> dict[str, float]:
    """ND/NM/iND/iNM [min, avg, max] over the allocation's nodes, TD/TM totals."""
    nnodes = int(rank_node.max()) + 1
    src_node, dst_node = rank_node[messages.src], rank_node[messages.dst]
    inter = src_node != dst_node
    out: dict[str, float] = {}
    for name, mask in (("N", inter), ("iN", ~inter)):
        data = np.bincount(src_node[mask], weights=messages.nbytes[mask], minlength=nnodes)
        count = np.bincount(src_node[mask], minlength=nnodes).astype(float)
        _stats(data, f"{name}D", out)
        _stats(count, f"{name}M", out)
    out["TD"] = float(messages.nbytes[inter].sum())
    out["TM"] = float(np.count_nonzero(inter))
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
            levels: Sequence[str]) -> dict[str, float]:
    """Traffic per topology level: out of each component, and between its children.

    ``ancestors[i, k]`` is the id of allocation node ``i``'s level-``k`` component.
    """
    nnodes = int(rank_node.max()) + 1
    if ancestors.shape[0] < nnodes or ancestors.shape[1] != len(levels):
        raise ValueError(f"ancestors has shape {ancestors.shape}, need ({nnodes}, {len(levels)})")
    prefixes = _level_prefixes(kind, levels)
    count_names, ratio_names = _count_names(kind, len(levels))
    src_node, dst_node = rank_node[messages.src], rank_node[messages.dst]
    child_src, child_dst = src_node, dst_node          # level -1 = the nodes themselves
    ncomponents = [nnodes]
    out: dict[str, float] = {}
    per_level: list[tuple[str, np.ndarray, np.ndarray, int]] = []
    for k in range(len(levels)):
        _, local = np.unique(ancestors[:nnodes, k], return_inverse=True)
        ncomp = int(local.max()) + 1
        ncomponents.append(ncomp)
        comp_src, comp_dst = local[src_node], local[dst_node]
        per_level.append((prefixes[k], comp_src, comp_dst, ncomp))
        leaving = comp_src != comp_dst
        inside = ~leaving & (child_src != child_dst)
        for name, mask in ((prefixes[k], leaving), (f"i{prefixes[k]}", inside)):
            data = np.bincount(comp_src[mask], weights=messages.nbytes[mask], minlength=ncomp)
            count = np.bincount(comp_src[mask], minlength=ncomp).astype(float)
            _stats(data, f"{name}D", out)
            _stats(count, f"{name}M", out)
        child_src, child_dst = comp_src, comp_dst
    for k, name in count_names.items():
        out[name] = float(ncomponents[k + 1])
    for k, name in ratio_names.items():
        out[name] = ncomponents[k] / ncomponents[k + 1]
    if kind == "dragonfly":
        _, gsrc, gdst, ng = per_level[-1]
        between = gsrc != gdst
        pair = gsrc[between] * ng + gdst[between]
        out["GGD_max"] = float(np.bincount(pair, weights=messages.nbytes[between]).max()) if pair.size else 0.0
        out["GGM_max"] = float(np.bincount(pair).max()) if pair.size else 0.0
    return {name: out[name] for name in class_c_names(kind, levels)}


def feature_vector(messages: Messages, rank_node: np.ndarray, feature_class: str,
                   ancestors: np.ndarray | None = None, kind: str = "", levels: Sequence[str] = ()
                   ) -> dict[str, float]:
    """Class A, A+B, or A+B+C features as one ordered dict (class C needs ``ancestors``)."""
    out = class_a(messages, rank_node)
    if feature_class in ("B", "C"):
        out.update(class_b(messages, rank_node))
    if feature_class == "C":
        if ancestors is None:
            raise ValueError("class C features need the allocation's ancestors")
        out.update(class_c(messages, rank_node, ancestors, kind, levels))
    return out
