"""The one placement model: for every node, its ancestors in the network by level.

Every topology source (ibnetdiscover, xtprocadmin, topology.conf, ...) ends up as a
:class:`Placement`. The daemon loads it at start and on reload (:meth:`Placement.load`) and
calls :meth:`Placement.encode` per Predict, so ``encode`` is a dict lookup per node plus one
numpy fancy-index; everything else is precomputed in ``__post_init__``.

>>> p = Placement("tree", ("switch", "rack"),
...               {"n1": ("s1", "r1"), "n2": ("s2", "r1")})
>>> p.path("n2")
('s2', 'r1')
>>> p.encode(["n2", "n1"]).tolist()
[[1, 0], [0, 0]]
>>> Placement.from_dict(p.to_dict()) == p
True
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import InvalidTopology, UnknownNode

logger = logging.getLogger(__name__)

KINDS = ("infiniband", "dragonfly", "tree")
_SHOWN_UNKNOWN = 10  # how many unknown names an UnknownNode message lists


@dataclass(frozen=True)
class Placement:
    """Node -> ancestors (nearest first) for one network.

    ``levels`` names the ancestor levels from the node's parent upward; every path has exactly
    ``len(levels)`` entries. ``warnings`` carries what the parser skipped or doubted, so that a
    saved model still says it; ``source`` says what it was built from.
    """

    kind: str
    levels: tuple[str, ...]
    paths: Mapping[str, tuple[str, ...]] = field(repr=False)  # 10,000 nodes: keep repr short
    warnings: tuple[str, ...] = ()
    source: str = ""
    _row: Mapping[str, int] = field(init=False, repr=False, compare=False)
    _ids: np.ndarray = field(init=False, repr=False, compare=False)
    _names: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidTopology(f"placement kind {self.kind!r} is not one of {', '.join(KINDS)}")
        levels = tuple(str(level) for level in self.levels)
        if not levels:
            raise InvalidTopology("placement has no levels")
        paths: dict[str, tuple[str, ...]] = {}
        for node, path in self.paths.items():
            path = tuple(str(a) for a in path)
            if len(path) != len(levels):
                raise InvalidTopology(
                    f"node {node!r} has {len(path)} ancestors {list(path)} but the placement has "
                    f"{len(levels)} levels {list(levels)}")
            paths[str(node)] = path
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "paths", MappingProxyType(paths))
        object.__setattr__(self, "warnings", tuple(str(w) for w in self.warnings))
        # Ids are assigned in sorted-name order per level, so they do not depend on dict order
        # and are stable for one Placement (and for an identical one loaded again).
        nodes = sorted(paths)
        ids = np.empty((len(nodes), len(levels)), dtype=np.int32)
        names = []
        for level in range(len(levels)):
            level_names = sorted({paths[n][level] for n in nodes})
            index = {name: i for i, name in enumerate(level_names)}
            ids[:, level] = [index[paths[n][level]] for n in nodes]
            names.append(tuple(level_names))
        ids.setflags(write=False)
        object.__setattr__(self, "_row", {n: i for i, n in enumerate(nodes)})
        object.__setattr__(self, "_ids", ids)
        object.__setattr__(self, "_names", tuple(names))

    def __hash__(self) -> int:  # paths is a read-only mapping view, not hashable itself
        return hash((self.kind, self.levels, len(self.paths)))

    def __reduce__(self):  # picklable (process pools) although paths is a mapping view
        return (type(self).from_dict, (self.to_dict(),))

    # -- queries ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.paths)

    def __contains__(self, node: object) -> bool:
        return node in self._row

    def path(self, node: str) -> tuple[str, ...]:
        """Ancestors of ``node``, nearest first; :class:`UnknownNode` if it is not placed."""
        try:
            return self.paths[node]
        except KeyError:
            raise UnknownNode(f"node {node!r} is not in the {self.kind} topology") from None

    def encode(self, nodes: Sequence[str]) -> np.ndarray:
        """int32 array ``(len(nodes), len(levels))`` of ancestor ids (unique within a level)."""
        row = self._row
        try:
            rows = [row[n] for n in nodes]
        except KeyError:
            unknown = [n for n in nodes if n not in row]
            shown = ", ".join(map(str, unknown[:_SHOWN_UNKNOWN]))
            more = f" and {len(unknown) - _SHOWN_UNKNOWN} more" if len(unknown) > _SHOWN_UNKNOWN else ""
            raise UnknownNode(
                f"{len(unknown)} node(s) not in the {self.kind} topology: {shown}{more}") from None
        return self._ids[np.asarray(rows, dtype=np.intp)] if rows else np.empty(
            (0, len(self.levels)), dtype=np.int32)

    def ancestor_name(self, level: int, ancestor_id: int) -> str:
        """Name of the ancestor that :meth:`encode` numbered ``ancestor_id`` at ``level``."""
        return self._names[level][ancestor_id]

    def level_size(self, level: int) -> int:
        """How many distinct ancestors exist at ``level``."""
        return len(self._names[level])

    # -- serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "levels": list(self.levels),
            "nodes": {n: {"path": list(p)} for n, p in sorted(self.paths.items())},
        }
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.source:
            data["source"] = self.source
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Placement":
        if not isinstance(data, Mapping):
            raise InvalidTopology("placement JSON must be an object")
        for key in ("kind", "levels", "nodes"):
            if key not in data:
                raise InvalidTopology(f"placement JSON has no {key!r} key")
        nodes = data["nodes"]
        if not isinstance(nodes, Mapping) or not isinstance(data["levels"], list):
            raise InvalidTopology("placement JSON: 'nodes' must be an object and 'levels' a list")
        paths = {}
        for name, entry in nodes.items():
            path = entry.get("path") if isinstance(entry, Mapping) else None
            if not isinstance(path, list):
                raise InvalidTopology(f"placement JSON: node {name!r} has no 'path' list")
            paths[name] = tuple(path)
        warnings = data.get("warnings", [])
        if not isinstance(warnings, list):
            raise InvalidTopology("placement JSON: 'warnings' must be a list")
        return cls(kind=str(data["kind"]), levels=tuple(data["levels"]), paths=paths,
                   warnings=tuple(warnings), source=str(data.get("source", "")))

    def save(self, path: str | os.PathLike) -> None:
        """Write JSON atomically (temp file in the same folder, then ``os.replace``)."""
        path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".placement-", suffix=".json", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(self.to_dict(), out, indent=1)
                out.write("\n")
            # mkstemp creates 0600; a topology is read by the daemon's own (other) user.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Placement":
        path = os.fspath(path)
        try:
            with open(path, encoding="utf-8") as stream:
                data = json.load(stream)
        except FileNotFoundError as error:
            raise InvalidTopology(f"{path}: no such topology file") from error
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise InvalidTopology(f"{path}: not valid placement JSON: {error}") from error
        except OSError as error:
            raise InvalidTopology(f"{path}: cannot read topology file: {error}") from error
        try:
            return cls.from_dict(data)
        except InvalidTopology as error:
            raise InvalidTopology(f"{path}: {error}") from error
