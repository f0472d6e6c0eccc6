"""The prediction engine: which model answers, and the site policy on top.

One immutable :class:`ModelSet` is served at a time; reload builds a new one beside it and
swaps the reference, so Predict never waits for a reload and never sees half a model set.
History models are online (they ``observe`` every ended job); on reload the new one replays
the store and then the outcomes that arrived while it replayed, under one short lock.

Order of answers for the runtime (first that answers wins):
1. the application's runtime model (inputs → runtime, issue 6),
2. the trained walltime model (history features, issue 4),
3. the recent-history model (last runs of this user and application),
4. the user's request, else the site default (flagged as a fallback).
Communication time (issue 5) and node-count advice (issue 7) are added when the job has a
pattern / the application has a scaling model.
"""
from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from hpcpredict.daemon.errors import HpcPredictError
from hpcpredict.daemon.faults import FaultBoard
from hpcpredict.daemon.jobspec import JobSpec
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.recent_history import RecentHistoryModel
from hpcpredict.daemon.registry import SITE_KEY, Artifact, ModelRegistry
from hpcpredict.daemon.timefmt import human
from hpcpredict.daemon.walltime_policy import ceil_minute, plan_limits

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSet:
    walltime: Any = None                 # OnlinePredictor from hpcpredict.daemon.history, or None
    runtime: Any = None                  # ApplicationModels, or None
    comm: dict = field(default_factory=dict)       # cluster key -> CommModelSet
    scaling: dict = field(default_factory=dict)    # application -> ScalingModel
    placement: Any = None                # hpcpredict.topology Placement, or None
    # Callables resolved at (re)load so the prediction path never runs an import statement.
    comm_request: Any = None             # hpcpredict.daemon.comm.service.CommRequest
    node_advice: Any = None              # hpcpredict.daemon.scaling.advice.node_advice
    expand_nodes: Any = None             # hpcpredict.topology.hostlist.expand
    artifacts: tuple[Artifact, ...] = ()
    errors: tuple[str, ...] = ()
    loaded: dict = field(default_factory=dict)     # (kind, key) -> (Artifact, model), for the next reload


@dataclass(frozen=True)
class Answer:
    runtime_s: float
    low_s: float
    high_s: float
    coverage: float
    bound_s: float
    time_limit_s: int
    time_min_s: int
    model_name: str
    model_version: str
    fallback: bool
    application: str
    risk: float
    explanation: tuple[str, ...]
    comm_time_s: float | None = None
    feature_class: str = ""
    comm_model: str = ""
    node_advice: tuple = ()              # hpcpredict.daemon.scaling.advice.NodeAdviceRow


class PredictionEngine:
    def __init__(self, config, store, registry: ModelRegistry, faults: FaultBoard | None = None):
        self.config = config
        self.store = store
        self.registry = registry
        self.models = ModelSet()
        self.recent = RecentHistoryModel(config.policy.history_window, config.policy.default_runtime_s)
        self.faults = faults if faults is not None else FaultBoard()
        self._history_lock = threading.Lock()
        self._reload_lock = threading.Lock()
        self._pending: list[JobRecord] | None = None

    # ------------------------------------------------------------------ loading
    def _build(self) -> ModelSet:
        loaded, errors = self.registry.load_all()
        for entry, previous in self.models.loaded.items():
            if entry not in loaded and entry in self.registry.entries():
                loaded[entry] = previous  # the new version was refused: keep serving the last good one
        walltime = runtime = placement = None
        comm, scaling = {}, {}
        for (kind, key), (artifact, model) in loaded.items():
            if kind == "walltime" and key == SITE_KEY:
                walltime = model
            elif kind == "runtime":
                runtime = model
            elif kind == "comm":
                comm[key] = model
            elif kind == "scaling":
                scaling.update(model)
            elif kind == "topology":
                placement = model
        if self.config.topology.file:
            try:
                from hpcpredict.topology.placement import Placement
                placement = Placement.load(self.config.topology.file)
            except (HpcPredictError, OSError) as error:
                errors.append(f"topology file {self.config.topology.file}: {error}")
                placement = self.models.placement  # keep serving the last good one until the file returns
        comm_request = advice = expand = None
        if comm:
            from hpcpredict.daemon.comm.service import CommRequest as comm_request
        if scaling:
            from hpcpredict.daemon.scaling.advice import node_advice as advice
        if placement is not None:
            from hpcpredict.topology.hostlist import expand
        return ModelSet(walltime=walltime, runtime=runtime, comm=comm, scaling=scaling, placement=placement,
                        comm_request=comm_request, node_advice=advice, expand_nodes=expand,
                        artifacts=tuple(artifact for artifact, _ in loaded.values()), errors=tuple(errors),
                        loaded=loaded)

    def reload(self) -> ModelSet:
        """Build a new model set beside the serving one, replay history into it, swap."""
        with self._reload_lock:
            new = self._build()
            recent = RecentHistoryModel(self.config.policy.history_window, self.config.policy.default_runtime_s)
            with self._history_lock:
                self._pending = []
            try:
                for record in self.store.iter_jobs():
                    recent.observe(record)
                    if new.walltime is not None:
                        new.walltime.observe(record)
                self.faults.clear("store", "history replay")
            except HpcPredictError as error:
                self.faults.set("store", "history replay", str(error))
            with self._history_lock:
                for record in self._pending or ():
                    recent.observe(record)
                    if new.walltime is not None:
                        new.walltime.observe(record)
                self._pending = None
                self.recent, self.models = recent, new
            if new.errors:
                self.faults.set("models", "load", "; ".join(new.errors))
            else:
                self.faults.clear("models", "load")
            logger.info("serving %d models (%d refused)", len(new.artifacts), len(new.errors))
            return new

    def observe(self, record: JobRecord) -> None:
        with self._history_lock:
            self.recent.observe(record)
            if self.models.walltime is not None:
                self.models.walltime.observe(record)
            if self._pending is not None:
                self._pending.append(record)

    # ------------------------------------------------------------------ predicting
    def _history_answer(self, job: JobRecord, risk: float, models: ModelSet):
        with self._history_lock:
            guess = None
            if models.walltime is not None:
                guess = models.walltime.predict(job, risk)
            if guess is None or guess.fallback:
                recent = self.recent.predict(job, risk)
                if guess is None or not recent.fallback:
                    guess = recent
        return guess

    def estimate(self, spec: JobSpec, *, at_allocation: bool = False) -> Answer:
        models = self.models
        policy = self.config.policy
        risk = spec.risk or policy.risk
        requested = 0 if spec.time_limit_is_default else spec.time_limit_s
        job = JobRecord(job_id=spec.job_id, user=spec.user, submit_time=spec.submit_time,
                        requested_time_s=float(requested), application=spec.application,
                        job_name=spec.job_name, group=spec.group, account=spec.account,
                        partition=spec.partition, qos=spec.qos, nodes=spec.nodes,
                        requested_procs=spec.ntasks * spec.cpus_per_task or spec.nodes, inputs=spec.inputs)
        by_inputs = None
        input_errors: list[str] = []
        if models.runtime is not None and spec.application:
            try:
                # The bound at the risk target is the upper end of the two-sided interval whose
                # upper tail holds `risk` of the mass (conformal-calibrated by the model).
                by_inputs = models.runtime.estimate(spec.application, spec.inputs, spec.nodes, spec.ntasks,
                                                    spec.cpus_per_task, bound_coverage=max(0.5, 1.0 - 2.0 * risk))
            except HpcPredictError as error:
                input_errors.append(f"runtime model not used: {error}")
        if by_inputs is not None:
            # The inputs model answers: history only explains. The recent-history model says
            # "your last runs of APP" at a fraction of the walltime model's cost, and the walltime
            # model is not asked for an answer it would then calibrate itself on without serving.
            with self._history_lock:
                recent = self.recent.predict(job, risk)
            point, low, high, coverage = by_inputs.runtime_s, by_inputs.low_s, by_inputs.high_s, by_inputs.coverage
            bound = max(by_inputs.bound_s, by_inputs.high_s, point)
            name, version = by_inputs.model_name, by_inputs.model_version
            explanation = list(by_inputs.explanation) + ([] if recent.fallback else list(recent.explanation))
            fallback = False
        else:
            guess = self._history_answer(job, risk, models)
            explanation = list(guess.explanation) + input_errors
            point, low, high, coverage, bound = guess.runtime_s, guess.low_s, guess.high_s, guess.coverage, guess.bound_s
            name = guess.source
            version = getattr(models.walltime, "version", "1") if name != RecentHistoryModel.name \
                else RecentHistoryModel.version
            fallback = guess.fallback

        comm_time = None
        feature_class = comm_model = ""
        if spec.comm is not None:
            comm_time, feature_class, comm_model, lines = self._comm(spec, models, at_allocation)
            explanation.extend(lines)

        advice: tuple = ()
        scaling = models.scaling.get(spec.application) if spec.application else None
        if scaling is not None:
            advice, lines = self._advice(spec, scaling, models)
            explanation.extend(lines)
            at_request = next((row for row in advice if row.nodes == (spec.nodes or 1)), None)
            if fallback and at_request is not None:
                # No history and no inputs model, but the scaling model knows this size.
                point = at_request.runtime_s
                low = high = point
                coverage = 0.0
                name, version, fallback = f"scaling/{spec.application}", getattr(scaling, "modeler", "1"), False
                explanation = [f"scaling model of {spec.application} at {at_request.nodes} nodes: {human(point)}"] + \
                    [line for line in explanation if not line.startswith("no history")]

        bound = max(bound, point)
        time_limit = max(policy.min_time_limit_s, ceil_minute(bound))
        # time_min is a kill limit on Slurm 22.05: the risk-bounded value or nothing (walltime_policy).
        time_min = plan_limits(bound_s=bound, requested_s=requested or 0, floor_s=policy.min_time_limit_s,
                               fallback=fallback).time_min_s or 0
        if requested:
            if bound > requested:
                explanation.append(f"your request of {human(requested)} may be too short "
                                   f"(bound at {risk:.0%} risk: {human(bound)})")
        explanation.extend(spec.warnings[:3])
        return Answer(runtime_s=point, low_s=low, high_s=high, coverage=coverage, bound_s=bound,
                      time_limit_s=time_limit, time_min_s=time_min, model_name=name, model_version=str(version),
                      fallback=fallback, application=spec.application, risk=risk,
                      explanation=tuple(explanation), comm_time_s=comm_time, feature_class=feature_class,
                      comm_model=comm_model, node_advice=advice)

    def _comm(self, spec: JobSpec, models: ModelSet, at_allocation: bool):
        if not models.comm:
            return None, "", "", ["no communication model published"]
        model = models.comm.get(spec.cluster) or models.comm.get(SITE_KEY) or next(iter(models.comm.values()))
        comm = spec.comm
        request = models.comm_request(pattern=comm.pattern, message_bytes=comm.message_bytes, ntasks=spec.ntasks,
                              nodes=spec.nodes, ntasks_per_node=spec.ntasks_per_node,
                              distribution=spec.distribution, tasks_per_node=spec.tasks_per_node,
                              grid=comm.grid, peers=comm.peers, messages=comm.messages, seed=comm.seed)
        lines = []
        node_names = None
        if at_allocation and spec.node_list and models.placement is not None:
            try:
                node_names = models.expand_nodes(spec.node_list)
            except HpcPredictError as error:  # topology.hostlist's ParseError
                return None, "", "", [f"node list not understood: {error}"]
        try:
            result = model.predict(request, node_names, models.placement if node_names else None)
        except HpcPredictError as error:
            if node_names is None:
                return None, "", "", [f"communication time not predicted: {error}"]
            lines.append(f"class C features unavailable ({error}); using class B")
            result = model.predict(request, None, None)
        seconds = result.seconds * comm.phases
        lines.append(f"communication ({comm.pattern}, class {result.feature_class}): {human(seconds)}"
                     + (f" over {comm.phases} phases" if comm.phases > 1 else ""))
        return seconds, result.feature_class, result.model_name, lines

    def _advice(self, spec: JobSpec, scaling, models: ModelSet):
        numeric = {k: v for k, v in spec.inputs.items() if isinstance(v, float)}
        try:
            rows = models.node_advice(scaling, requested_nodes=spec.nodes or 1,
                               ntasks_per_node=spec.ntasks_per_node or max(1, spec.ntasks // max(spec.nodes, 1)),
                               other_params=numeric, requested_time_s=float(spec.time_limit_s),
                               policy=self.config.policy.advice_policy,
                               tolerance=self.config.policy.advice_tolerance)
        except HpcPredictError as error:
            return (), [f"no node-count advice: {error}"]
        advice = tuple(rows)
        best = next((r for r in advice if r.recommended), None)
        lines = [f"node-count advice: {best.nodes} nodes ({human(best.runtime_s)}, {best.node_hours:.1f} node-h)"] if best else []
        return advice, lines

    # ------------------------------------------------------------------ status
    def describe(self) -> list[Artifact]:
        return list(self.models.artifacts)

