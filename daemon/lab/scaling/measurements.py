"""Measurements for scaling models: Extra-P JSON Lines input, repetitions, noise (rrd).

Input format (Extra-P's JSON Lines, one measurement or a list of repetitions per line)::

    {"params": {"p": 64, "n": 1000}, "callpath": "main", "metric": "time", "value": [1.2, 1.3]}

``callpath`` defaults to ``"<root>"`` and ``metric`` to ``"time"`` as in Extra-P; lines with the
same point, callpath and metric add repetitions.

>>> sets = parse_jsonlines(['{"params": {"p": 2}, "value": [1.0, 1.1]}'], source="x")
>>> sets[("<root>", "time")].points[0].values
(1.0, 1.1)
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ...errors import ParseError

MIN_VALUES_PER_PARAMETER = 5
LOCATIONS = ("median", "mean")


class InsufficientMeasurements(ParseError):
    """Too few distinct values of a parameter to fit a PMNF model (seed 001 needs >= 5)."""


@dataclass(frozen=True)
class MeasurementPoint:
    """One parameter configuration and its repeated measurements."""

    coordinate: tuple[float, ...]
    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.values))


@dataclass(frozen=True)
class MeasurementSet:
    """All points of one (callpath, metric), parameters in a fixed order."""

    callpath: str
    metric: str
    parameters: tuple[str, ...]
    points: tuple[MeasurementPoint, ...]

    def coordinates(self) -> np.ndarray:
        """Shape (n_points, n_parameters)."""
        return np.array([p.coordinate for p in self.points], dtype=float)

    def medians(self) -> np.ndarray:
        return np.array([p.median for p in self.points], dtype=float)

    def summarised(self, location: str) -> "MeasurementSet":
        """The same points with their repetitions replaced by one value: their ``location``
        ("median" or "mean"); modelers that read :meth:`medians` then fit that estimate."""
        if location not in LOCATIONS:
            raise ValueError(f"unknown location estimate {location!r} (known: {', '.join(LOCATIONS)})")
        pick = np.median if location == "median" else np.mean
        points = tuple(MeasurementPoint(p.coordinate, (float(pick(p.values)),)) for p in self.points)
        return MeasurementSet(self.callpath, self.metric, self.parameters, points)

    def columns(self) -> dict[str, np.ndarray]:
        coords = self.coordinates()
        return {name: coords[:, k] for k, name in enumerate(self.parameters)}

    def check_enough_values(self, source: str = "") -> None:
        """Raise InsufficientMeasurements unless every parameter has >= 5 distinct values."""
        coords = self.coordinates()
        for k, name in enumerate(self.parameters):
            distinct = np.unique(coords[:, k])
            if len(distinct) < MIN_VALUES_PER_PARAMETER:
                raise InsufficientMeasurements(
                    f"parameter {name!r} of callpath {self.callpath!r}, metric {self.metric!r} has "
                    f"{len(distinct)} distinct values ({', '.join(f'{v:g}' for v in distinct)}); "
                    f"PMNF modeling needs at least {MIN_VALUES_PER_PARAMETER}",
                    source=source, part=name)


def relative_deviation_range(points: Sequence[MeasurementPoint]) -> float:
    """Seed 001's noise estimate rrd: max - min of (v - mean)/mean over all repetitions.

    Returns a fraction (0.1 = 10 %); 0 when no point has repetitions.
    """
    pooled = pooled_deviations(points)
    return float(pooled.max() - pooled.min()) if len(pooled) else 0.0


def pooled_deviations(points: Sequence[MeasurementPoint]) -> np.ndarray:
    """Relative deviations (v - mean)/mean of every repetition of every point with >= 2 values
    (the set seed 001's rrd is the range of)."""
    deviations = []
    for point in points:
        values = np.asarray(point.values, dtype=float)
        mean = values.mean()
        if len(values) >= 2 and mean != 0:
            deviations.append((values - mean) / mean)
    return np.concatenate(deviations) if deviations else np.zeros(0)


def deviation_skewness(points: Sequence[MeasurementPoint]) -> float:
    """Sample skewness of :func:`pooled_deviations` (0 when undefined): about 0 for symmetric
    noise, clearly positive for right-skewed timing noise (slow runs from interference).

    >>> pts = [MeasurementPoint((1.0,), (1.0, 1.0, 1.0, 1.0, 5.0)), MeasurementPoint((2.0,), (2.0, 2.1))]
    >>> deviation_skewness(pts) > 1.0
    True
    """
    from scipy.stats import skew   # fits only, never the Predict path

    pooled = pooled_deviations(points)
    if len(pooled) <= 2 or pooled.std() == 0:
        return 0.0
    return float(skew(pooled))


def location_variance_ratio(points: Sequence[MeasurementPoint], draws: int = 400, seed: int = 0) -> float:
    """Var(mean) / Var(median) of ``r`` repetitions, bootstrapped from the pooled noise.

    The noise is pooled as seed 001 pools it for rrd: relative deviations (v - mean)/mean of
    every repetition of every point (``r`` = the median repetition count). Below 1 the mean of
    a point's repetitions is the more efficient (less noisy) estimate of its value — e.g. ~0.5
    for uniform noise, ~0.7 for normal noise — above 1 the median is (heavy tails, outliers,
    strongly skewed noise). Returns 1.0 when there is nothing to compare (fewer than 3
    repetitions: the median of 1 or 2 values is their mean).

    >>> calm = [MeasurementPoint((float(k),), (9.0, 9.5, 10.0, 10.5, 11.0)) for k in range(1, 6)]
    >>> location_variance_ratio(calm) < 1.0
    True
    >>> spiky = calm[:4] + [MeasurementPoint((5.0,), (10.0, 9.5, 10.5, 10.0, 30.0))]  # one slow run
    >>> location_variance_ratio(spiky) > 1.0
    True
    """
    counts = [len(p.values) for p in points]
    repetitions = int(np.median(counts)) if counts else 0
    pooled = pooled_deviations(points)
    if repetitions < 3 or not len(pooled):
        return 1.0
    samples = np.random.default_rng(seed).choice(pooled, size=(draws, repetitions), replace=True)
    var_median = float(np.var(np.median(samples, axis=1)))
    var_mean = float(np.var(samples.mean(axis=1)))
    if var_median <= 0:
        return 1.0 if var_mean <= 0 else np.inf
    return var_mean / var_median


def _number(value, *, source: str, line: int, part: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError("expected a number", source=source, line=line, part=part)
    if not math.isfinite(value):
        raise ParseError("expected a finite number", source=source, line=line, part=part)
    return float(value)


def parse_jsonlines(lines: Iterable[str], *, source: str = "") -> dict[tuple[str, str], MeasurementSet]:
    """Parse Extra-P JSON Lines into one MeasurementSet per (callpath, metric)."""
    collected: dict[tuple[str, str], dict[tuple, list[float]]] = {}
    parameters: tuple[str, ...] | None = None
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise ParseError(f"invalid JSON ({error.msg})", source=source, line=number,
                             part=text[:60]) from error
        if not isinstance(record, dict):
            raise ParseError("expected a JSON object", source=source, line=number, part=text[:60])
        params = record.get("params", record.get("parameters"))
        if not isinstance(params, dict) or not params:
            raise ParseError("missing or empty 'params' object", source=source, line=number,
                             part=text[:60])
        names = tuple(sorted(params))
        if parameters is None:
            parameters = names
        elif names != parameters:
            raise ParseError(f"parameters {list(names)} differ from earlier lines {list(parameters)}",
                             source=source, line=number, part="params")
        coordinate = []
        for name in names:
            value = _number(params[name], source=source, line=number, part=f"params.{name}")
            if value <= 0:
                raise ParseError("parameter values must be > 0 (PMNF uses powers and log2)",
                                 source=source, line=number, part=f"params.{name}")
            coordinate.append(value)
        if "value" not in record:
            raise ParseError("missing 'value'", source=source, line=number, part=text[:60])
        raw_values = record["value"]
        raw_values = raw_values if isinstance(raw_values, list) else [raw_values]
        if not raw_values:
            raise ParseError("empty 'value' list", source=source, line=number, part="value")
        values = [_number(v, source=source, line=number, part="value") for v in raw_values]
        callpath = str(record.get("callpath", "<root>"))
        metric = str(record.get("metric", "time"))
        collected.setdefault((callpath, metric), {}).setdefault(tuple(coordinate), []).extend(values)
    if parameters is None:
        raise ParseError("no measurements", source=source)
    return {
        key: MeasurementSet(key[0], key[1], parameters,
                            tuple(MeasurementPoint(c, tuple(v)) for c, v in sorted(points.items())))
        for key, points in collected.items()
    }


def read_jsonlines(path: Path) -> dict[tuple[str, str], MeasurementSet]:
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_jsonlines(handle, source=str(path))
    except OSError as error:
        raise ParseError(f"cannot read ({error.strerror})", source=str(path)) from error
    except UnicodeDecodeError as error:
        raise ParseError("not UTF-8 text", source=str(path)) from error
