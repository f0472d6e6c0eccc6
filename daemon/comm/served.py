"""What the daemon calls: a cluster's communication models, loaded once, predicting per request.

:class:`CommModelSet` loads MODEL_DIR (written by ``hpcpredict comm train``) and answers
:class:`CommRequest` s: class A/B at submission (the mapping follows from nodes/ntasks/
distribution, as Slurm lays it out), class C once the node list is known and placed.

Building the features (pattern, mapping, per-link loads) costs 0.3-2 ms for a few hundred to a
thousand ranks, far more than the compiled trees (~50 µs). Class B features depend only on the
request, and submissions repeat the same shapes (arrays, sweeps, resubmits), so they are kept
in a bounded LRU cache (``FEATURE_CACHE`` requests); class C features depend on the allocated
nodes and are built each time.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .features import phase_features
from .models import ClassModel
from .patterns import PATTERNS, build_pattern
from ..errors import InvalidRequest, ModelArtifactError
from ...topology.mapping import map_ranks
from ...topology.placement import Placement

# MODEL_DIR's format (written by hpcpredict.daemon.lab.comm.training): manifest.json and one
# skops file per class. The manifest's "baselines" are the lab's, read by its evaluation.
FORMAT_VERSION = 1
MAX_TASKS = 1 << 20
FEATURE_CACHE = 1024


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


@dataclass(frozen=True)
class CommRequest:                 # plain data, built by the daemon from the gRPC request
    pattern: str                   # benchmark|halo3d|halo4d|lulesh1|lulesh2|lulesh3|explicit
    message_bytes: int             # l
    ntasks: int
    nodes: int
    ntasks_per_node: int           # 0 = derive
    distribution: str = "block"
    tasks_per_node: str = ""       # SLURM_TASKS_PER_NODE form, "" = unknown
    grid: tuple[int, ...] = ()     # process grid; () = MPI_Dims_create-like
    peers: int = 0                 # PM for the benchmark pattern
    messages: tuple[tuple[int, int, int], ...] = ()   # explicit (src, dst, bytes)
    seed: int = 0


@dataclass(frozen=True)
class CommPrediction:
    seconds: float
    feature_class: str             # "A", "B" or "C"
    model_name: str
    explanation: tuple[str, ...]


class CommModelSet:
    """The trained models of one cluster, loaded from a directory."""

    def __init__(self, manifest: dict, models: dict[str, ClassModel]):
        self.manifest, self.models = manifest, models
        placement = manifest.get("placement") or {}
        self.kind = placement.get("kind", "")
        self.levels = tuple(placement.get("levels", ()))
        # The class B features of a request, cached (an lru_cache: ``cache_clear`` empties it).
        # Per instance, so a reload (a new CommModelSet) starts empty. The cached dicts are
        # only read (predict_row, explanation), never changed.
        self.request_features = functools.lru_cache(maxsize=FEATURE_CACHE)(self.features)

    @classmethod
    def load(cls, directory: Path) -> "CommModelSet":
        directory = Path(directory)
        try:
            manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise ModelArtifactError(f"{directory}: no manifest.json (not a comm model directory)") from error
        except (OSError, ValueError) as error:
            raise ModelArtifactError(f"{directory}/manifest.json: unreadable: {error}") from error
        if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
            raise ModelArtifactError(f"{directory}/manifest.json: not comm model format {FORMAT_VERSION}")
        models = {}
        try:
            for name, entry in manifest["classes"].items():
                model = ClassModel(name, entry["features"], entry.get("params"))
                models[name] = model.load_estimator(directory / entry["file"])
        except (KeyError, TypeError, ValueError) as error:
            raise ModelArtifactError(f"{directory}/manifest.json: malformed: {error!r}") from error
        if "A" not in models or "B" not in models:
            raise ModelArtifactError(f"{directory}: classes A and B are required")
        return cls(manifest, models)

    # -- request -> phase ------------------------------------------------------------------
    @staticmethod
    def _mapping(request: CommRequest, node_count: int) -> np.ndarray:
        if not 1 <= request.ntasks <= MAX_TASKS:
            raise InvalidRequest("ntasks", f"must be in 1..{MAX_TASKS}, got {request.ntasks}")
        if request.ntasks_per_node < 0:
            raise InvalidRequest("ntasks_per_node", f"must be >= 0, got {request.ntasks_per_node}")
        return map_ranks(node_count, request.ntasks, request.distribution or "block",
                         tasks_per_node=request.tasks_per_node or None,
                         ntasks_per_node=request.ntasks_per_node or None).astype(np.int64)

    def features(self, request: CommRequest, node_list: Sequence[str] | None = None,
                 placement: Placement | None = None) -> dict[str, float]:
        if request.pattern not in PATTERNS:
            raise InvalidRequest("pattern", f"unknown pattern {request.pattern!r} (one of {', '.join(PATTERNS)})")
        if node_list is not None and len(node_list) != request.nodes:
            raise InvalidRequest("nodes", f"{request.nodes} nodes requested but node list has {len(node_list)}")
        if request.nodes < 1:
            raise InvalidRequest("nodes", f"must be >= 1, got {request.nodes}")
        rank_node = self._mapping(request, request.nodes)
        messages = build_pattern(request.pattern, request.ntasks, request.message_bytes,
                                 grid=tuple(request.grid), peers=request.peers,
                                 messages=tuple(request.messages), seed=request.seed)
        return phase_features(messages, rank_node, node_list, placement)

    def predict(self, request: CommRequest, node_list: Sequence[str] | None = None,
                placement: Placement | None = None) -> CommPrediction:
        use_c = node_list is not None and placement is not None and "C" in self.models
        if placement is not None and use_c and (placement.kind, tuple(placement.levels)) != (self.kind, self.levels):
            raise InvalidRequest("placement", f"model was trained on a {self.kind} {list(self.levels)} "
                                 f"topology, not {placement.kind} {list(placement.levels)}")
        if use_c:
            row = self.features(request, node_list, placement)
        elif _hashable(request):
            row = self.request_features(request)
        else:                   # a hand-made request with list fields: built, not cached
            row = self.features(request)
        feature_class = "C" if use_c else "B"
        seconds = self.models[feature_class].predict_row(row)
        shown = ", ".join(f"{f}={row[f]:.4g}" for f in self.models[feature_class].features[:6])
        return CommPrediction(
            seconds=seconds, feature_class=feature_class, model_name=f"gbrt-class{feature_class}",
            explanation=(f"{request.pattern} phase on {request.ntasks} ranks / {request.nodes} nodes",
                         f"class {feature_class} features: {shown}"))
