"""Train a cluster's communication models from benchmark records and save MODEL_DIR.

MODEL_DIR holds ``manifest.json`` (format version, placement kind/levels, per class the
feature list and GBRT parameters, baseline coefficients, training summary) and one skops
file per class (``classA.skops``, ``classB.skops``, ``classC.skops``).
:meth:`hpcpredict.daemon.comm.served.CommModelSet.load` reads it.

The learned models of seed 004: GBRT with least-absolute-deviation loss per feature class.

* Class A uses (n, ppn, l, PD, PM); class B adds the mapping features; class C adds the
  placement features, first ranked by recursive feature elimination with a linear SVR
  (``RFECV``, 15-40 kept; inputs log1p-scaled and standardised for the linear model).
* Target: log2 of the phase time. Times span five orders of magnitude and the metrics are
  relative errors; LAD on the log target fits the median ratio, which is what MMRE/Pred25
  reward (the paper fits raw time; we state the difference in the benchmark report).
* Hyper-parameters by cross-validated random search over the paper's ranges, trimmed to what
  a shared 2-core machine fits in minutes (see ``TUNE_SPACE``).
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import skops.io as sio
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.feature_selection import RFE
from sklearn.model_selection import KFold, RandomizedSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.svm import LinearSVR

from .baselines import AlphaBeta, AlphaBetaGamma, SingleVariable, first_level_feature
from .dataset import feature_table
from ...comm.features import CLASS_A, CLASS_B, class_c_model_candidates
from ...comm.models import ClassModel
from ...comm.records import CommRecord
from ...comm.served import FORMAT_VERSION
from ...errors import InvalidRequest
from ....topology.placement import Placement

logger = logging.getLogger(__name__)

# Paper ranges: n_estimators 100-2000, learning_rate 0.001-1, min_samples_leaf 1-5,
# min_samples_split 2-8, max_depth 3-8. The slow corner (2000 trees at lr 0.001) is left out:
# on the log target it does not converge in fewer trees and costs 10x the CPU.
TUNE_SPACE = {
    "n_estimators": [200, 400, 700],
    "learning_rate": [0.03, 0.06, 0.1, 0.2],
    "min_samples_leaf": [1, 2, 3, 4, 5],
    "min_samples_split": [2, 4, 6, 8],
    "max_depth": [3, 4, 5, 6, 7, 8],
}
DEFAULT_PARAMS = {"n_estimators": 400, "learning_rate": 0.1, "min_samples_leaf": 3,
                  "min_samples_split": 4, "max_depth": 6}
RFE_MIN, RFE_MAX = 15, 40
TUNE_SAMPLES = 1500   # the search runs on a random subset this large; the final fit uses all


def _gbrt(params: dict, seed: int):
    return GradientBoostingRegressor(loss="absolute_error", random_state=seed, **params)


def tune_gbrt(X: np.ndarray, y_log: np.ndarray, n_iter: int, seed: int) -> dict:
    """Random search with 3-fold CV (MAE of log2 time); ``n_iter=0`` keeps the defaults."""
    if n_iter <= 0 or len(y_log) < 30:
        return dict(DEFAULT_PARAMS)
    search = RandomizedSearchCV(_gbrt({}, seed), TUNE_SPACE, n_iter=n_iter, cv=KFold(3, shuffle=True, random_state=seed),
                                scoring="neg_mean_absolute_error", random_state=seed, refit=False)
    if len(y_log) > TUNE_SAMPLES:
        keep = np.random.default_rng(seed).choice(len(y_log), TUNE_SAMPLES, replace=False)
        X, y_log = X[keep], y_log[keep]
    search.fit(X, y_log)
    logger.info("GBRT tuning: best %s (MAE log2 %.3f)", search.best_params_, -search.best_score_)
    return dict(search.best_params_)


def rank_features(X: np.ndarray, y_log: np.ndarray, names: tuple[str, ...], seed: int) -> list[str]:
    """RFE with a linear SVR ranks the features; keep the top k, k in 15..40 by GBRT CV.

    The SVR ranking is the paper's; how many to keep is chosen by 3-fold CV of a small GBRT
    (the model that will use them) on at most ``TUNE_SAMPLES`` rows, because the linear
    model's own CV optimum (RFECV) sits at the lower bound and drops features the trees use.
    """
    if len(names) <= RFE_MIN:
        return list(names)
    scaled = make_pipeline(FunctionTransformer(np.log1p), StandardScaler()).fit_transform(X)
    svr = LinearSVR(C=1.0, epsilon=0.0, max_iter=20000, random_state=seed, dual="auto")
    ranking = RFE(svr, n_features_to_select=1, step=1).fit(scaled, y_log).ranking_
    order = np.argsort(ranking, kind="stable")
    rows = np.arange(len(y_log))
    if rows.size > TUNE_SAMPLES:
        rows = np.random.default_rng(seed).choice(rows, TUNE_SAMPLES, replace=False)
    best_k, best = RFE_MIN, -np.inf
    for k in range(RFE_MIN, min(RFE_MAX, len(names)) + 1, 5):
        quick = _gbrt({"n_estimators": 150, "learning_rate": 0.1, "max_depth": 6, "min_samples_leaf": 3}, seed)
        score = cross_val_score(quick, X[np.ix_(rows, order[:k])], y_log[rows],
                                cv=KFold(3, shuffle=True, random_state=seed),
                                scoring="neg_mean_absolute_error").mean()
        logger.info("RFE: top %d features, CV MAE(log2 t) %.4f", k, -score)
        if score > best:
            best_k, best = k, score
    return [names[i] for i in order[:best_k]]



def fit_class_model(model: ClassModel, X: np.ndarray, names: tuple[str, ...], y: np.ndarray,
                    seed: int = 0) -> ClassModel:
    """Fit ``model``'s GBRT on its features' columns of ``X`` and log2 of ``y`` (seconds)."""
    cols = [names.index(f) for f in model.features]
    return model.attach(_gbrt(model.params, seed).fit(X[:, cols], np.log2(y)))


def save_class_model(model: ClassModel, path: Path) -> None:
    """The skops file :meth:`ClassModel.load_estimator` reads back."""
    sio.dump(model.estimator_, path)


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
        model = fit_class_model(ClassModel(cls, features, params), X, names, y, seed)
        save_class_model(model, out_dir / f"class{cls}.skops")
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
