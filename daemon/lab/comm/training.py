"""Train a cluster's communication models from benchmark records and save MODEL_DIR.

MODEL_DIR holds ``manifest.json`` (format version, placement kind/levels, per class the
feature list and GBRT parameters, baseline coefficients, training summary) and one skops
file per class (``classA.skops``, ``classB.skops``, ``classC.skops``).
:meth:`hpcpredict.daemon.comm.served.CommModelSet.load` reads it.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from .baselines import AlphaBeta, AlphaBetaGamma, SingleVariable, first_level_feature
from .dataset import feature_table
from ...comm.features import CLASS_A, CLASS_B, class_c_model_candidates
from ...comm.models import ClassModel, rank_features, tune_gbrt
from ...comm.records import CommRecord
from ...errors import InvalidRequest
from ....topology.placement import Placement

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1


def train_model_set(records: Sequence[CommRecord], placement: Placement | None, out_dir: Path, *,
                    tune_iter: int = 4, seed: int = 0) -> dict:
    """Fit classes A, B (and C + baselines when a placement is given); write ``out_dir``."""
    if len(records) < 10:
        raise InvalidRequest("data", f"need at least 10 records to train, got {len(records)}")
    X, names, y = feature_table(records, placement)
    manifest: dict = {"format_version": FORMAT_VERSION, "classes": {}, "baselines": {},
                      "training": {"records": len(records),
                                   "sources": sorted({r.source for r in records}),
                                   "patterns": sorted({r.pattern for r in records}),
                                   "fabrics": sorted({f"{r.fabric} {r.shape}".strip() for r in records})}}
    if placement is not None:
        manifest["placement"] = {"kind": placement.kind, "levels": list(placement.levels)}
    feature_sets = {"A": list(CLASS_A), "B": list(CLASS_A + CLASS_B)}
    if placement is not None:
        candidates = class_c_model_candidates(names)
        cols = [names.index(n) for n in candidates]
        feature_sets["C"] = rank_features(X[:, cols], np.log2(y), candidates, seed)
        logger.info("class C: RFE kept %d of %d features", len(feature_sets["C"]), len(candidates))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for cls, features in feature_sets.items():
        cols = [names.index(f) for f in features]
        params = tune_gbrt(X[:, cols], np.log2(y), tune_iter, seed)
        model = ClassModel(cls, features, params).fit(X, names, y, seed)
        model.save(out_dir / f"class{cls}.skops")
        manifest["classes"][cls] = {"features": features, "params": params, "file": f"class{cls}.skops"}
    ab = AlphaBeta().fit(X, names, y)
    manifest["baselines"][ab.name] = ab.to_dict()
    if placement is not None:
        abg = AlphaBetaGamma().fit(X, names, y)
        sv = SingleVariable(first_level_feature(names)).fit(X, names, y)
        manifest["baselines"][abg.name] = abg.to_dict()
        manifest["baselines"][sv.name] = sv.to_dict()
        manifest["baselines"][sv.name]["formula"] = sv.describe()
    tmp = out_dir / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out_dir / "manifest.json")
    return manifest
