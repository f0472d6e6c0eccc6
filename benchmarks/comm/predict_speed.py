"""Time CommModelSet.predict (class B and class C) per request, model loaded once.

    .venv/bin/python benchmarks/comm/predict_speed.py MODEL_DIR TOPOLOGY.json [--repeat 200]

For each request: the whole ``predict`` for a new request (features + model; the class B
feature cache cleared before each call) and for a repeated one (class B features from the
cache; class C is never cached), the feature building alone, and the model on the same one
row two ways — sklearn's ``GradientBoostingRegressor.predict`` (what
the daemon called before) and the compiled flat-array walk (what it calls now), with the
largest relative difference between the two. Medians over ``--repeat`` calls.
"""
import argparse
import time
from pathlib import Path

import numpy as np

from hpcpredict.daemon.comm.service import CommModelSet, CommRequest
from hpcpredict.topology.placement import Placement


def median_us(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("topology", type=Path)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    models = CommModelSet.load(args.model_dir)
    placement = Placement.load(str(args.topology))
    nodes = sorted(placement.paths, key=lambda n: int(n.rsplit("-", 1)[1]))
    print("| request | class | trees | predict new µs | predict repeated µs | features µs | sklearn row µs "
          "| compiled row µs | max rel diff |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for pattern, ntasks, nnodes in (("halo3d", 256, 16), ("lulesh1", 216, 27), ("halo4d", 1024, 64)):
        request = CommRequest(pattern=pattern, message_bytes=65536, ntasks=ntasks, nodes=nnodes, ntasks_per_node=0)
        for label, kwargs in (("B", {}), ("C", {"node_list": nodes[:nnodes], "placement": placement})):
            if label not in models.models:
                continue
            model = models.models[label]
            row = models.features(request, **kwargs)
            x = np.array([[row[f] for f in model.features]])
            def new_request():
                models._request_features.cache_clear()
                models.predict(request, **kwargs)
            whole = median_us(new_request, args.repeat)
            repeated = median_us(lambda: models.predict(request, **kwargs), args.repeat)
            features = median_us(lambda: models.features(request, **kwargs), args.repeat)
            sk = median_us(lambda: model.estimator_.predict(x), args.repeat)
            compiled = median_us(lambda: model.predict_row(row), args.repeat)
            diff = abs(model.compiled_.predict_row(x[0]) - model.estimator_.predict(x)[0]) / abs(model.estimator_.predict(x)[0])
            trees = model.estimator_.estimators_.shape[0]
            print(f"| {pattern} {ntasks} ranks / {nnodes} nodes | {label} | {trees} | {whole:.0f} | {repeated:.0f} | {features:.0f} | "
                  f"{sk:.0f} | {compiled:.0f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
