"""Scaling models as plain data, and node-count advice from them (called per Predict).

A :class:`ScalingModel` is a fitted PMNF function of runtime (seconds) against the process
count ``p`` (or ``nodes``) and possibly other parameters, stored as one JSON file per
application. :func:`node_advice` evaluates it at candidate node counts and recommends one.
Everything here is plain Python/numpy-free math so it is cheap on the hot path.

At a candidate the site has measured (the model keeps the median and its standard error of
every training point with repetitions), advice uses the measured median instead of the model
when the model misses it by more than the measurements' noise: a PMNF function with few terms
cannot follow every shape (on the 2-core reference machine a CPU-bound code speeds up from 1
to 2 processes and slows down beyond, and the models smooth the dip away), and a runtime
measured many times at that very count is the better answer there (benchmarks/README.md,
scaling).

>>> m = ScalingModel(application="lulesh", expression="10 + 640 * p^(-1)", parameters=("p",),
...                  constant=10.0, terms=((640.0, (("p", -1.0, 0),)),),
...                  scaling_parameter="p", ranges={"p": (4.0, 64.0)})
>>> rows = node_advice(m, requested_nodes=4, ntasks_per_node=4, other_params={},
...                    requested_time_s=3600)
>>> [r.nodes for r in rows if r.recommended]   # least node-hours within 10 % of the fastest
[32]
>>> rows = node_advice(m, requested_nodes=4, ntasks_per_node=4, other_params={},
...                    requested_time_s=60, policy="meets-request")
>>> [r.nodes for r in rows if r.recommended]
[4]
>>> format_advice_table(rows)[0]
'nodes  runtime    node-h  eff'
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import InvalidRequest, ModelArtifactError
from ..timefmt import clock

POLICIES = ("least-node-hours", "meets-request")
FORMAT_VERSION = 1
# A measured median replaces the model where the model misses it by more than this many
# standard errors of the median and by more than MEASURED_FLOOR of it (timing jitter that no
# one would act on).
LACK_OF_FIT_SE = 2.0
MEASURED_FLOOR = 0.02

# One term: (coefficient, ((parameter, i, j), ...)) meaning coefficient * prod x^i * log2(x)^j.
Term = tuple[float, tuple[tuple[str, float, int], ...]]


@dataclass(frozen=True)
class NodeAdviceRow:
    nodes: int
    runtime_s: float
    node_hours: float
    efficiency: float
    recommended: bool
    measured: bool = False   # runtime_s is the measured median at this count (see module doc)


@dataclass(frozen=True)
class ScalingModel:
    """A fitted PMNF model of runtime (s) for one application; JSON round trip, no pickle.

    ``scaling_parameter`` is ``"p"`` (processes = nodes * tasks per node) or ``"nodes"``.
    ``ranges`` holds the measured [min, max] per parameter; ``max_extrapolation`` bounds how
    far beyond the largest measured scale advice may go (seed 001 evaluates up to 16x, but
    errors grow fast with distance, so 4x by default). ``measured`` holds, per training point
    with repetitions, its coordinate (in ``parameters`` order), median and the median's
    standard error.
    """

    application: str
    expression: str
    parameters: tuple[str, ...] = ("p",)
    constant: float = 0.0
    terms: tuple[Term, ...] = ()
    scaling_parameter: str = "p"
    ranges: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    max_extrapolation: float = 4.0
    noise: float = 0.0
    cv_smape: float = 0.0
    modeler: str = "regression"
    callpath: str = "<root>"
    metric: str = "time"
    measured: tuple[tuple[tuple[float, ...], float, float], ...] = ()

    def predict(self, params: Mapping[str, float]) -> float:
        total = self.constant
        for coefficient, factors in self.terms:
            value = coefficient
            for name, i, j in factors:
                x = float(params[name])
                if i:
                    value *= x ** i
                if j:
                    value *= math.log2(x) ** j
            total += value
        return float(total)

    def measured_runtime(self, params: Mapping[str, float], predicted: float) -> float | None:
        """The measured median at exactly ``params`` if the model (``predicted``) misses it by
        more than the measurements' noise; None otherwise."""
        if not self.measured:
            return None
        coordinate = tuple(float(params[name]) for name in self.parameters)
        for point, median, standard_error in self.measured:
            if all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(point, coordinate)):
                miss = abs(predicted - median)
                if miss > LACK_OF_FIT_SE * standard_error and miss > MEASURED_FLOOR * median:
                    return median
                return None
        return None

    def scale_range(self) -> tuple[float, float]:
        """Sane range of the scaling parameter: measured minimum .. max * max_extrapolation."""
        low, high = self.ranges.get(self.scaling_parameter, (1.0, float("inf")))
        return float(low), float(high) * self.max_extrapolation

    def to_dict(self) -> dict:
        return {
            "format": "hpcpredict-scaling-model", "version": FORMAT_VERSION,
            "application": self.application, "expression": self.expression,
            "parameters": list(self.parameters), "constant": self.constant,
            "terms": [{"coefficient": c, "factors": [[n, i, j] for n, i, j in f]} for c, f in self.terms],
            "scaling_parameter": self.scaling_parameter,
            "ranges": {k: [float(v[0]), float(v[1])] for k, v in self.ranges.items()},
            "max_extrapolation": self.max_extrapolation, "noise": self.noise,
            "cv_smape": self.cv_smape, "modeler": self.modeler,
            "callpath": self.callpath, "metric": self.metric,
            "measured": [{"params": dict(zip(self.parameters, point)), "median": median, "se": se}
                         for point, median, se in self.measured],
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "ScalingModel":
        """Build from :meth:`to_dict` output; raises ValueError/KeyError/TypeError on bad data."""
        if data.get("format") != "hpcpredict-scaling-model":
            raise ValueError("not an hpcpredict scaling model (missing format marker)")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"unsupported version {data.get('version')!r}")
        parameters = tuple(str(p) for p in data["parameters"])
        terms = tuple(
            (float(t["coefficient"]), tuple((str(n), float(i), int(j)) for n, i, j in t["factors"]))
            for t in data["terms"]
        )
        for _, factors in terms:
            for name, _, _ in factors:
                if name not in parameters:
                    raise ValueError(f"term uses unknown parameter {name!r}")
        scaling = str(data.get("scaling_parameter", "p"))
        if scaling not in parameters:
            raise ValueError(f"scaling parameter {scaling!r} is not a model parameter")
        ranges = {str(k): (float(v[0]), float(v[1])) for k, v in data.get("ranges", {}).items()}
        numbers = [float(data["constant"]), float(data.get("max_extrapolation", 4.0))]
        numbers += [c for c, _ in terms]
        if not all(math.isfinite(v) for v in numbers):
            raise ValueError("non-finite coefficient")
        measured = []
        for entry in data.get("measured", []):   # absent in models saved before it existed
            point = tuple(float(entry["params"][name]) for name in parameters)
            median, se = float(entry["median"]), float(entry["se"])
            if not all(math.isfinite(v) for v in point + (median, se)) or median <= 0 or se < 0:
                raise ValueError(f"bad measured point {entry!r}")
            measured.append((point, median, se))
        return cls(
            application=str(data["application"]), expression=str(data["expression"]),
            parameters=parameters, constant=numbers[0], terms=terms, scaling_parameter=scaling,
            ranges=ranges, max_extrapolation=numbers[1], noise=float(data.get("noise", 0.0)),
            cv_smape=float(data.get("cv_smape", 0.0)), modeler=str(data.get("modeler", "regression")),
            callpath=str(data.get("callpath", "<root>")), metric=str(data.get("metric", "time")),
            measured=tuple(measured),
        )


def save_scaling_model(model: ScalingModel, directory: Path) -> Path:
    """Write ``<application>.json`` atomically (temp file + rename)."""
    directory.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model.application)
    path = directory / f"{safe}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(model.to_dict(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def load_scaling_models(directory: Path) -> dict[str, ScalingModel]:
    """Every ``*.json`` in ``directory`` keyed by application; a bad file raises
    ModelArtifactError naming it."""
    directory = Path(directory)
    if not directory.is_dir():
        raise ModelArtifactError(f"{directory}: scaling model directory does not exist")
    models: dict[str, ScalingModel] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            model = ScalingModel.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError, KeyError,
                TypeError, AttributeError, IndexError) as error:
            raise ModelArtifactError(f"{path}: bad scaling model: {error}") from error
        if model.application in models:
            raise ModelArtifactError(f"{path}: second scaling model for application {model.application!r}")
        models[model.application] = model
    return models


def default_candidates(model: ScalingModel, requested_nodes: int, ntasks_per_node: int) -> list[int]:
    """Powers of two from requested/8 to requested*8, within the model's sane range, plus the
    requested count itself."""
    low, high = model.scale_range()
    per_unit = ntasks_per_node if model.scaling_parameter == "p" else 1
    candidates = {requested_nodes}
    power = 1
    while power <= requested_nodes * 8:
        if power * 8 >= requested_nodes and low <= power * per_unit <= high:
            candidates.add(power)
        power *= 2
    return sorted(candidates)


def node_advice(model: ScalingModel, *, requested_nodes: int, ntasks_per_node: int,
                other_params: Mapping[str, float], requested_time_s: float,
                candidates: Sequence[int] | None = None, policy: str = "least-node-hours",
                tolerance: float = 0.10) -> list[NodeAdviceRow]:
    """Predicted runtime, node-hours and efficiency per candidate node count; one recommended.

    Efficiency is relative to the smallest candidate: ``T(n0)*n0 / (T(n)*n)``. Candidates whose
    prediction is not a positive finite runtime are dropped (the model is outside its range).
    """
    if policy not in POLICIES:
        raise InvalidRequest("policy", f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    if not isinstance(requested_nodes, int) or requested_nodes < 1:
        raise InvalidRequest("requested_nodes", f"must be an integer >= 1, got {requested_nodes!r}")
    if not isinstance(ntasks_per_node, int) or ntasks_per_node < 1:
        raise InvalidRequest("ntasks_per_node", f"must be an integer >= 1, got {ntasks_per_node!r}")
    if not (tolerance >= 0 and math.isfinite(tolerance)):
        raise InvalidRequest("tolerance", f"must be >= 0, got {tolerance!r}")
    if policy == "meets-request" and not (requested_time_s > 0):
        raise InvalidRequest("requested_time_s", f"must be > 0 for policy meets-request, got {requested_time_s!r}")
    params = {}
    for name in model.parameters:
        if name == model.scaling_parameter:
            continue
        if name not in other_params:
            raise InvalidRequest("other_params", f"model for {model.application!r} needs parameter {name!r}")
        value = float(other_params[name])
        if not (value > 0 and math.isfinite(value)):
            raise InvalidRequest("other_params", f"parameter {name!r} must be > 0, got {value!r}")
        params[name] = value
    if candidates is None:
        candidates = default_candidates(model, requested_nodes, ntasks_per_node)
    nodes_list = sorted({int(n) for n in candidates})
    if not nodes_list or nodes_list[0] < 1:
        raise InvalidRequest("candidates", "need at least one node count >= 1")
    per_unit = ntasks_per_node if model.scaling_parameter == "p" else 1
    predictions = []
    measured_at = set()
    for nodes in nodes_list:
        params[model.scaling_parameter] = float(nodes * per_unit)
        try:
            runtime = model.predict(params)
        except (OverflowError, ValueError, ZeroDivisionError):
            continue
        measured = model.measured_runtime(params, runtime) if math.isfinite(runtime) else None
        if measured is not None:
            runtime = measured
            measured_at.add(nodes)
        if math.isfinite(runtime) and runtime > 0:
            predictions.append((nodes, runtime))
    if not predictions:
        raise InvalidRequest("requested_nodes",
                             f"scaling model for {model.application!r} predicts no positive runtime "
                             f"at node counts {nodes_list}")
    base_nodes, base_runtime = predictions[0]
    if policy == "least-node-hours":
        fastest = min(r for _, r in predictions)
        eligible = [(n * r, n) for n, r in predictions if r <= fastest * (1 + tolerance)]
        chosen = min(eligible)[1]
    else:
        meeting = [n for n, r in predictions if r <= requested_time_s]
        chosen = meeting[0] if meeting else min(predictions, key=lambda nr: (nr[1], nr[0]))[0]
    return [
        NodeAdviceRow(nodes=n, runtime_s=r, node_hours=n * r / 3600.0,
                      efficiency=(base_runtime * base_nodes) / (r * n), recommended=(n == chosen),
                      measured=n in measured_at)
        for n, r in predictions
    ]


def format_advice_table(rows: Sequence[NodeAdviceRow]) -> list[str]:
    """Short lines: header, one line per candidate, the recommended one marked with '*', a
    runtime that is the measured median rather than the model's with '(measured)'."""
    lines = ["nodes  runtime    node-h  eff"]
    for row in rows:
        mark = " *" if row.recommended else ""
        note = " (measured)" if row.measured else ""
        lines.append(f"{row.nodes:>5}  {clock(row.runtime_s):>9}  {row.node_hours:>6.2f}  "
                     f"{row.efficiency:>4.0%}{mark}{note}")
    return lines
