"""Fit every (callpath, metric) of an Extra-P input and turn a fit into a ScalingModel.

>>> import json
>>> from hpcpredict.daemon.lab.scaling.measurements import parse_jsonlines
>>> lines = [json.dumps({"params": {"p": p}, "value": [2 + 64 / p]}) for p in (1, 2, 4, 8, 16)]
>>> fit = fit_all(parse_jsonlines(lines), modeler="regression")[("<root>", "time")]
>>> fit.function.expression()
'2 + 64 * p^(-1)'
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from ...errors import InvalidRequest, ParseError
from ...scaling.advice import ScalingModel
from .measurements import MeasurementSet
from .abstract_modeler import FittedModel, Modeler
from .modelers import get_modeler

def fit_all(sets: Mapping[tuple[str, str], MeasurementSet], *, modeler: str | Modeler = "regression",
            negative: bool | str = "auto", source: str = "") -> dict[tuple[str, str], FittedModel]:
    """One fitted model per (callpath, metric), by ``modeler``: a registered modeler's name (made
    with ``negative`` and ``source`` where it takes them) or a :class:`Modeler` to reuse."""
    if isinstance(modeler, str):
        cls = get_modeler(modeler)
        options = {"negative": negative, "source": source}
        modeler = cls(**{key: value for key, value in options.items() if key in cls.OPTIONS})
    fits = {}
    for key, data in sets.items():
        data.check_enough_values(source)
        fits[key] = modeler.model(data)
    return fits


def scaling_model(fit: FittedModel, data: MeasurementSet, *, application: str,
                  scaling_parameter: str = "p", max_extrapolation: float = 4.0) -> ScalingModel:
    """Plain-data ScalingModel for node advice from a fit of runtime in seconds."""
    if scaling_parameter not in data.parameters:
        raise InvalidRequest("scaling_parameter",
                             f"{scaling_parameter!r} is not a parameter of the data ({', '.join(data.parameters)})")
    coords = data.coordinates()
    ranges = {name: (float(coords[:, k].min()), float(coords[:, k].max()))
              for k, name in enumerate(data.parameters)}
    terms = tuple((t.coefficient, tuple((name, float(i), int(j)) for name, (i, j) in t.exponents.items()))
                  for t in fit.function.terms)
    return ScalingModel(
        measured=measured_points(data),
        application=application, expression=fit.function.expression(), parameters=data.parameters,
        constant=fit.function.constant, terms=terms, scaling_parameter=scaling_parameter,
        ranges=ranges, max_extrapolation=max_extrapolation, noise=fit.noise, cv_smape=fit.cv_smape,
        modeler=fit.modeler, callpath=data.callpath, metric=data.metric)


def measured_points(data: MeasurementSet, min_repetitions: int = 3) -> tuple:
    """(coordinate, median, standard error of the median) of every point with at least
    ``min_repetitions`` positive values.

    The noise is pooled over all points (robust scale of every repetition's deviation from its
    point's median, relative), as the modelers' noise estimate is: a point's own handful of
    repetitions can agree by chance under load that drifts between sweeps (five runs at one
    count within 1 % while the same count's next five spread over 40 %). The standard error of
    a median of n values is then 1.2533 * sigma * median / sqrt(n).
    """
    kept = []
    for point in data.points:
        values = np.asarray(point.values, dtype=float)
        if len(values) >= min_repetitions and np.all(values > 0):
            kept.append((point.coordinate, values, point.median))
    if not kept:
        return ()
    relative = np.concatenate([values / median - 1.0 for _, values, median in kept])
    sigma = 1.4826 * float(np.median(np.abs(relative)))
    return tuple((tuple(float(c) for c in coordinate), median, 1.2533 * sigma * median / math.sqrt(len(values)))
                 for coordinate, values, median in kept)


def read_points_csv(path: Path, parameters: Iterable[str]) -> list[dict[str, float]]:
    """Prediction points: CSV with a header naming every model parameter, one point per row."""
    parameters = list(parameters)
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except OSError as error:
        raise ParseError(f"cannot read ({error.strerror})", source=str(path)) from error
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise ParseError("empty file, expected a header naming the parameters", source=str(path))
    header = [h.strip() for h in rows[0]]
    missing = [p for p in parameters if p not in header]
    if missing:
        raise ParseError(f"header lacks parameter(s) {', '.join(missing)}", source=str(path), line=1,
                         part=",".join(header))
    points = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ParseError(f"expected {len(header)} fields, got {len(row)}", source=str(path),
                             line=number, part=",".join(row))
        point = {}
        for name, cell in zip(header, row):
            if name not in parameters:
                continue
            try:
                value = float(cell)
            except ValueError as error:
                raise ParseError("not a number", source=str(path), line=number, part=cell) from error
            if not (np.isfinite(value) and value > 0):
                raise ParseError("parameter values must be finite and > 0", source=str(path),
                                 line=number, part=cell)
            point[name] = value
        points.append(point)
    return points


def describe(fit: FittedModel, data: MeasurementSet, points: list[dict[str, float]]) -> dict:
    """JSON-ready description: model string, terms with [i, j] pairs, noise, predictions."""
    return {
        "callpath": data.callpath, "metric": data.metric, "parameters": list(data.parameters),
        "modeler": fit.modeler, "model": fit.function.expression(),
        "constant": fit.function.constant,
        "terms": [{"coefficient": t.coefficient,
                   "exponents": {name: [float(i), int(j)] for name, (i, j) in t.exponents.items()}}
                  for t in fit.function.terms],
        "noise": fit.noise, "location": fit.location, "cv_smape": fit.cv_smape,
        "predictions": [{"params": p, "value": float(fit.function.evaluate(p))} for p in points],
    }
