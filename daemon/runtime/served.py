"""Per-application runtime models as the daemon serves them (Predict hot path).

Artifacts, no pickle: ``DIRECTORY/<application>/<variant>.npz`` (plain arrays, loaded with
``allow_pickle=False``) + ``<variant>.json`` (encoder, names, learner, metadata, SHA-256 of the
npz), written by :func:`hpcpredict.daemon.lab.runtime.packing.save_application_model`. Every
learner of :mod:`.artifacts` can be served (extra-trees, ANN ensemble, boosted
trees, log-linear, start-up + steps, a blend: the format string names it; artifacts written before ANN serving load unchanged).
An application can have several variants — e.g. ``inputs`` (job-script inputs only) and
``runtime`` (inputs + early runtime features): :meth:`ApplicationModels.estimate` uses the
variant with the most required inputs that are all present, so the same call re-predicts
better once runtime features arrive (``ReportRuntimeFeatures``).

The request's ``nodes``, ``ntasks`` and ``cpus_per_task`` are inputs under those names; the
metadata key ``input_aliases`` (e.g. ``{"np": "ntasks"}``) maps a model input to one of them.

>>> import tempfile, pathlib
>>> from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
>>> from hpcpredict.daemon.lab.runtime.model import RuntimeModel
>>> from hpcpredict.daemon.lab.runtime.packing import save_application_model
>>> csv = "n,ntasks,t\\n" + "\\n".join(f"{n},{p},{n / p:.3f}" for n in range(10, 200, 5) for p in (1, 2, 4))
>>> model = RuntimeModel(params={"n_estimators": 20, "random_state": 0}).fit(parse_runs_csv(csv, target="t"))
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> save_application_model(model, root, application="solver", metadata={"version": "1"})
>>> models = ApplicationModels.load(root)
>>> models.applications()
['solver']
>>> estimate = models.estimate("solver", {"n": 100.0}, nodes=1, ntasks=4, cpus_per_task=1)
>>> 20 < estimate.runtime_s < 30, estimate.low_s <= estimate.runtime_s <= estimate.high_s
(True, True)
>>> models.estimate("solver", {}, nodes=1, ntasks=4, cpus_per_task=1) is None   # n missing
True
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from ..errors import InvalidRequest, ModelArtifactError
from ..estimates import RuntimeEstimate
from .artifacts import FORMAT_VERSION, learner_of_format, unpack
from .conformal import conformal_multiplier
from .derived import DerivedInputs
from .encoding import InputEncoder

logger = logging.getLogger(__name__)

REQUEST_FIELDS = ("nodes", "ntasks", "cpus_per_task")
# A user's own model of an application: DIRECTORY/<application>/users/<user>/<variant>.json. An
# application name is whatever a job claims, so runs that disagree with the other users' are
# kept out of the pooled model (lab/runtime/agreement.py) and modelled for their user alone.
USERS_DIR = "users"


class _Variant:
    """One loaded model (any servable learner), ready for single-row prediction."""

    def __init__(self, path: Path):
        try:
            description = json.loads(path.read_text())
            blob = path.with_suffix(".npz").read_bytes()
        except (OSError, ValueError) as error:
            raise ModelArtifactError(f"{path}: cannot read model: {error}") from error
        learner = learner_of_format(description.get("format")) if isinstance(description, dict) else None
        if learner is None:
            raise ModelArtifactError(f"{path}: not a runtime model artifact")
        if description.get("format_version") != FORMAT_VERSION:
            raise ModelArtifactError(f"{path}: unsupported format version {description.get('format_version')!r}")
        if hashlib.sha256(blob).hexdigest() != description.get("arrays_sha256"):
            raise ModelArtifactError(f"{path.with_suffix('.npz')}: checksum mismatch")
        try:
            with np.load(io.BytesIO(blob), allow_pickle=False) as data:
                arrays = {name: np.asarray(data[name]) for name in data.files}
            self.encoder = InputEncoder.from_json(description["encoder"])
            self.predictor = unpack(description["format"], arrays, len(self.encoder.feature_names), description)
            self.scores = np.sort(arrays["calibration_scores"].astype(float))
            self.required = [str(name) for name in description["required_inputs"]]
            metadata = description.get("metadata") or {}
            self.aliases = {str(k): str(v) for k, v in dict(metadata.get("input_aliases", {})).items()}
            self.derived = DerivedInputs.from_json(description.get("derived_inputs")) or None
        except (KeyError, ValueError, TypeError, ModelArtifactError) as error:
            raise ModelArtifactError(f"{path}: corrupt model: {error}") from error
        try:
            self.ranges = {str(name): (float(low), float(high))
                           for name, (low, high) in dict(description.get("input_ranges") or {}).items()}
        except (TypeError, ValueError) as error:
            raise ModelArtifactError(f"{path}: corrupt model: bad input ranges: {error}") from error
        if self.scores.ndim != 1 or not np.all(np.isfinite(self.scores)):
            raise ModelArtifactError(f"{path}: corrupt model: bad calibration scores")
        self._multipliers: dict[float, float] = {}
        self._interval_texts: dict[float, str] = {}
        self.learner = learner
        self.application = str(description["application"])
        self.variant = str(description["variant"])
        self.kept_features = [str(f) for f in description.get("kept_features", [])]
        self.name = f"runtime-{learner}/{self.application}/{self.variant}"
        self.version = str(metadata.get("version", description["arrays_sha256"][:12]))
        # The fixed lines of the explanation, formatted once (Predict asks for them every time).
        self._describe_text = f"{self.application}: {self.predictor.describe()} '{self.variant}'"

    def _interval_text(self, coverage: float) -> str:
        text = self._interval_texts.get(coverage)
        if text is None:
            text = self._interval_texts[coverage] = (f"{coverage:.0%} interval: {self.predictor.interval_method()}, "
                                                     f"conformal-calibrated on {self.scores.size} held-out runs")
        return text

    def _multiplier(self, coverage: float) -> float:
        q = self._multipliers.get(coverage)
        if q is None:
            q = self._multipliers[coverage] = conformal_multiplier(self.scores, coverage)
        return q

    def log_dist(self, inputs: Mapping[str, object]) -> tuple[float, float] | None:
        """(m, s) of log runtime, or None when a required input is missing."""
        vector = self.encoder.encode_one(inputs, needed=self.required)
        return None if vector is None else self.predictor.log_dist(vector)

    def _outside(self, inputs: Mapping[str, object]) -> list[str]:
        """A warning per input far outside what the model was trained on (beyond twice the
        largest or half the smallest value seen, or a range's width beyond it): the estimate
        is then an extrapolation, however narrow its interval looks."""
        warnings = []
        for name, (low, high) in self.ranges.items():
            value = inputs.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            width = high - low
            if low > 0 and high > 0:
                far = value > 2 * high or value < low / 2
            else:
                far = value > high + max(width, 1.0) or value < low - max(width, 1.0)
            if far:
                warnings.append(f"warning: {name}={value:g} is far outside the training range "
                                f"{low:g}..{high:g}: this estimate is an extrapolation")
        return warnings[:3]

    def estimate(self, inputs: Mapping[str, object], coverage: float,
                 bound_coverage: float | None = None) -> RuntimeEstimate | None:
        if self.derived is not None:
            inputs = self.derived.apply(inputs)
        dist = self.log_dist(inputs)
        if dist is None:
            return None
        centre, spread = dist
        q = self._multiplier(coverage)
        bound = 0.0
        if bound_coverage is not None:  # same model pass, another calibrated width
            bound = math.exp(min(centre + self._multiplier(bound_coverage) * spread, 700.0))
        runtime, low, high = (math.exp(min(v, 700.0)) for v in (centre, centre - q * spread, centre + q * spread))
        used = ", ".join(f"{name}={inputs[name]}" for name in self.required if name in inputs)
        explanation = (self._describe_text, f"inputs used: {used}" if used else "inputs used: none",
                       self._interval_text(coverage), *self._outside(inputs))
        # calibrated: the conformal rank is one of the held-out scores (else the width is the largest one)
        calibrated = bound_coverage is not None and math.ceil((self.scores.size + 1) * bound_coverage) <= self.scores.size
        return RuntimeEstimate(runtime_s=runtime, low_s=low, high_s=high, coverage=coverage, bound_s=bound,
                               explanation=explanation, model_name=self.name, model_version=self.version,
                               bound_calibrated=calibrated)


class ApplicationModels:
    """Every per-application runtime model of the site, loaded once."""

    def __init__(self, variants: dict[str, list[_Variant]],
                 own: dict[tuple[str, str], list[_Variant]] | None = None):
        # Most informed variant first: estimate() takes the first whose inputs are present.
        self._variants = {app: sorted(items, key=lambda v: -len(v.required)) for app, items in variants.items()}
        # (application, user) -> that user's own model: one dict lookup on the Predict path
        self._own = {key: sorted(items, key=lambda v: -len(v.required)) for key, items in (own or {}).items()}

    @classmethod
    def load(cls, directory: Path) -> "ApplicationModels":
        directory = Path(directory)
        if not directory.is_dir():
            raise ModelArtifactError(f"{directory}: no such model directory")
        variants: dict[str, list[_Variant]] = {}
        own: dict[tuple[str, str], list[_Variant]] = {}
        for app_dir in sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith(".")):
            for path in sorted(app_dir.glob("*.json")):
                variants.setdefault(app_dir.name, []).append(cls._variant(path, app_dir.name))
            users = app_dir / USERS_DIR
            for user_dir in sorted(p for p in users.iterdir() if p.is_dir()) if users.is_dir() else ():
                for path in sorted(user_dir.glob("*.json")):
                    variant = cls._variant(path, app_dir.name)
                    variant.name = f"runtime-{variant.learner}/{variant.application}/{USERS_DIR}/{user_dir.name}/{variant.variant}"
                    variant._describe_text = f"{variant._describe_text} of {user_dir.name}'s own runs"
                    own.setdefault((app_dir.name, user_dir.name), []).append(variant)
        logger.info("loaded runtime models of %d application(s) (%d users' own) from %s",
                    len(variants), len(own), directory)
        return cls(variants, own)

    @staticmethod
    def _variant(path: Path, application: str) -> _Variant:
        variant = _Variant(path)
        if variant.application != application:
            raise ModelArtifactError(f"{path}: model of {variant.application!r} in directory {application!r}")
        return variant

    def applications(self) -> list[str]:
        return sorted(set(self._variants) | {app for app, _ in self._own})

    def own_models(self, application: str) -> list[str]:
        """The users who have a model of their own runs of ``application``."""
        return sorted(user for app, user in self._own if app == application)

    def kept_features(self, application: str) -> dict[str, list[str]]:
        return {v.variant: v.kept_features for v in self._variants.get(application, [])}

    def estimate(self, application: str, inputs: Mapping[str, float | str | bool], nodes: int, ntasks: int,
                 cpus_per_task: int, *, coverage: float = 0.8,
                 bound_coverage: float | None = None, user: str = "") -> RuntimeEstimate | None:
        """Runtime estimate, or None when no model fits (unknown application, inputs missing).

        ``user``'s own model of the application, when she has one, answers for her instead of
        the pooled model (which then never answers her: it was trained without her runs).

        ``bound_coverage`` also fills ``bound_s``: the upper end of that two-sided interval,
        computed from the same forest pass (the daemon's limit at its risk target).
        """
        for value, name in ((coverage, "coverage"), (bound_coverage, "bound_coverage")):
            if value is not None and not 0 < value < 1:
                raise InvalidRequest(name, f"must be between 0 and 1 (exclusive): {value}")
        variants = self._own.get((application, user)) if user else None
        if variants is None:
            variants = self._variants.get(application)
        if not variants:
            return None
        request = {"nodes": float(nodes), "ntasks": float(ntasks), "cpus_per_task": float(cpus_per_task)}
        merged = dict(inputs)
        merged.update((k, v) for k, v in request.items() if v > 0)
        for variant in variants:
            values = merged
            if variant.aliases:
                values = dict(merged)
                values.update((name, merged[field]) for name, field in variant.aliases.items() if field in merged)
            estimate = variant.estimate(values, coverage, bound_coverage)
            if estimate is not None:
                return estimate
        return None
