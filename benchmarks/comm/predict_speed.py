"""Time CommModelSet.predict (class B and class C) per request, model loaded once.

Part of ``python -m benchmarks run comm`` (on the models it has just trained).

For each request: the whole ``predict`` for a new request (features + model; the class B
feature cache cleared before each call) and for a repeated one (class B features from the
cache; class C is never cached), the feature building alone, and the model on the same one
row two ways — sklearn's ``GradientBoostingRegressor.predict`` (what
the daemon called before) and the compiled flat-array walk (what it calls now), with the
largest relative difference between the two. Medians over ``--repeat`` calls.
"""
import time
from pathlib import Path

import numpy as np

from hpcpredict.daemon.comm.served import CommModelSet, CommRequest
from hpcpredict.topology.placement import Placement


def median_us(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def predict_speed(model_dir: Path, topology: Path, repeat: int = 200) -> list[dict]:
    """One row per (request, class): median µs of the steps described above."""
    models = CommModelSet.load(model_dir)
    placement = Placement.load(str(topology))
    nodes = sorted(placement.paths, key=lambda n: int(n.rsplit("-", 1)[1]))
    rows = []
    for pattern, ntasks, nnodes in (("halo3d", 256, 16), ("lulesh1", 216, 27), ("halo4d", 1024, 64)):
        request = CommRequest(pattern=pattern, message_bytes=65536, ntasks=ntasks, nodes=nnodes, ntasks_per_node=0)
        for label, kwargs in (("B", {}), ("C", {"node_list": nodes[:nnodes], "placement": placement})):
            if label not in models.models:
                continue
            model = models.models[label]
            row = models.features(request, **kwargs)
            x = np.array([[row[f] for f in model.features]])

            def new_request():
                models.request_features.cache_clear()
                models.predict(request, **kwargs)
            reference = model.estimator_.predict(x)[0]
            rows.append({"request": f"{pattern} {ntasks} ranks / {nnodes} nodes", "class": label,
                         "trees": int(model.estimator_.estimators_.shape[0]),
                         "predict_new_us": round(median_us(new_request, repeat)),
                         "predict_repeated_us": round(median_us(lambda: models.predict(request, **kwargs), repeat)),
                         "features_us": round(median_us(lambda: models.features(request, **kwargs), repeat)),
                         "sklearn_row_us": round(median_us(lambda: model.estimator_.predict(x), repeat)),
                         "compiled_row_us": round(median_us(lambda: model.predict_row(row), repeat)),
                         "max_rel_diff": float(abs(model.compiled_.predict_row(x[0]) - reference) / abs(reference))})
    return rows
