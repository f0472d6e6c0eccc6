"""The prediction engine: which model answers, and the site policy on top.

One immutable :class:`~.model_set.ModelSet` is served at a time; reload builds a new one beside it and
swaps the reference, so Predict never waits for a reload and never sees half a model set.
History models are online (they ``observe`` every ended job); on reload the new one replays
the store and then the outcomes that arrived while it replayed, under one short lock.

The runtime comes from the first of :data:`hpcpredict.daemon.sources.SOURCES` that answers
without falling back (the application's runtime model from the job's inputs, the walltime
model from history, the recent-history model, the request or site default); each returns one
:class:`~hpcpredict.daemon.estimates.RuntimeEstimate`. Predictions take no lock: every model
they read is only read. Communication time and node-count advice are added when the job has
a pattern / the application has a scaling model; when every source fell back, the scaling
model's runtime at the requested size answers.
"""
from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, cast

from .errors import HpcPredictError
from .faults import FaultBoard
from .jobspec import JobSpec
from .records import JobRecord
from .recent_history import RecentHistoryModel
from .model_kinds import SITE_KEY, get_model_kind
from .model_set import ModelSet
from .registry import Artifact, ModelRegistry
from .scaling.advice import node_advice
from .sources import first_estimate
from .suggestion import request_warning, suggested_time_limit, suggestion_basis
from .timefmt import human
from .policy import (JobAsk, LimitChange, PolicyMode, Predicted, SlurmDefaultsCache, ceil_minute, decide,
                     decide_at_allocation, mode_for, within_max_time)
from ..topology.hostlist import expand as expand_nodes
from ..topology.placement import Placement

if TYPE_CHECKING:
    from .config import Config
    from .store import Store

logger = logging.getLogger(__name__)


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
    limits: LimitChange = LimitChange(None, None, "not_decided", "advise")   # what the hook applies
    user_message: str = ""               # the line the user reads at submission


class PredictionEngine:
    def __init__(self, config: Config, store: Store, registry: ModelRegistry, faults: FaultBoard | None = None):
        self.config = config
        self.store = store
        self.registry = registry
        self.models = ModelSet()
        self.recent = RecentHistoryModel(config.policy.history_window, config.policy.default_runtime_s)
        self.faults = faults if faults is not None else FaultBoard()
        self.policy_mode = PolicyMode(config.policy)   # the daemon starts its controller check
        self.slurm_defaults = SlurmDefaultsCache(config.policy)   # ... and its read of partitions, accounts
        self._history_lock = threading.Lock()
        self._reload_lock = threading.Lock()
        self._pending: list[JobRecord] | None = None

    # ------------------------------------------------------------------ loading
    def _build(self) -> ModelSet:
        loaded, errors = self.registry.load_all()
        root = self.registry.root
        served_from_root = any(root in artifact.path.parents for artifact, _ in self.models.loaded.values())
        missing = self.registry.unreadable_root(expected=served_from_root)
        if missing:
            # A models directory that was deleted (or lost its permissions) is a fault, not
            # "no models published": say so and keep serving what was loaded from it.
            errors.append(missing)
        for entry, previous in self.models.loaded.items():
            if entry not in loaded and (missing or entry in self.registry.entries()):
                loaded[entry] = previous  # the new version was refused: keep serving the last good one
        for kind, key in self.registry.entries():
            if (kind, key) not in loaded:
                # Refused with nothing served before (a start after a downgrade: a newer release's
                # format): the newest kept version this release reads, else the bundled one.
                older = self.registry.load_older(kind, key)
                if older is not None:
                    loaded[(kind, key)] = older
                    errors.append(f"{kind}/{key}: serving version {older[0].version} instead "
                                  f"{'(bundled)' if self.registry.bundled and self.registry.bundled in older[0].path.parents else '(kept)'}")
        slots: dict[str, Any] = {"comm": {}, "scaling": {}}
        for (kind, key), (artifact, model) in loaded.items():
            get_model_kind(kind).place(slots, key, model)
        if self.config.topology.file:
            try:
                slots["placement"] = Placement.load(self.config.topology.file)
            except (HpcPredictError, OSError) as error:
                errors.append(f"topology file {self.config.topology.file}: {error}")
                # keep serving the last good one until the file returns
                slots["placement"] = self.models.placement
        return ModelSet(**slots, artifacts=tuple(artifact for artifact, _ in loaded.values()),
                        errors=tuple(errors), loaded=loaded)

    def reload(self) -> ModelSet:
        """Build a new model set beside the serving one, replay history into it, swap."""
        with self._reload_lock:
            new = self._build()
            recent = RecentHistoryModel(self.config.policy.history_window, self.config.policy.default_runtime_s)
            with self._history_lock:
                self._pending = []
            # Only what the models keep: each user's (and user x application's) recent jobs,
            # and the jobs the walltime model has not been trained on (bounded start-up time).
            walltimes = [m for m in (new.walltime, *new.walltime_by_cluster.values()) if m is not None]
            since = None
            if walltimes:
                since = min(getattr(getattr(m, "state", None), "trained_until", -math.inf) for m in walltimes)
            try:
                for record in self.store.recent_jobs(self.config.policy.history_window, since_end=since):
                    recent.observe(record)
                    walltime = new.walltime_for(record.cluster)
                    if walltime is not None:
                        walltime.observe(record)
                self.faults.clear("store", "history replay")
            except HpcPredictError as error:
                self.faults.set("store", "history replay", str(error))
            with self._history_lock:
                for record in self._pending or ():
                    recent.observe(record)
                    walltime = new.walltime_for(record.cluster)
                    if walltime is not None:
                        walltime.observe(record)
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
            walltime = self.models.walltime_for(record.cluster)
            if walltime is not None:
                walltime.observe(record)
            if self._pending is not None:
                self._pending.append(record)

    # ------------------------------------------------------------------ predicting
    @staticmethod
    def _published(models: ModelSet, kind: str, application: str = "", cluster: str = "") -> Artifact | None:
        """The served artifact of ``kind`` that answered: the cluster's own walltime model, else
        the site's; the runtime folder; the scaling artifact holding ``application``."""
        walltime_key = cluster if cluster in models.walltime_by_cluster else SITE_KEY
        for (entry_kind, entry_key), (artifact, model) in models.loaded.items():
            if entry_kind != kind or (kind == "walltime" and entry_key != walltime_key):
                continue
            # A scaling artifact loads as application -> model (load_scaling_models).
            if kind == "scaling" and application not in cast(Mapping[str, object], model):
                continue
            return artifact
        return None

    def _provenance(self, models: ModelSet, kind: str, application: str, name: str,
                    version: str, cluster: str = "") -> tuple[str, str]:
        """(model_name, model_version) of an answer: a published model is named by its kind, key
        and registry version (``hpcpredict [walltime/_site]``, ``2026...-c890b7``), so every
        stored prediction can be traced to the artifact that made it; a rule keeps its own."""
        artifact = self._published(models, kind, application, cluster) if kind else None
        if artifact is None:
            return name, version
        return f"{name} [{artifact.kind}/{artifact.key}]", artifact.version

    def estimate(self, spec: JobSpec, *, at_allocation: bool = False, decide_limits: bool = True,
                 lower_time_limit: bool = False, job_time_limit_s: int = 0) -> Answer:
        """The answer for ``spec``; at submission (``decide_limits``) with the limits the hook
        sets; at allocation, ``lower_time_limit`` (the job's TimeLimit ``job_time_limit_s`` is the
        hook's own and the site lets PrologSlurmctld lower it) decides the TimeLimit it sets."""
        models = self.models
        policy = self.config.policy
        risk = spec.risk or policy.risk
        requested = spec.time_limit_s
        job = spec.record()
        # Limits are set at submission only: later answers (allocation, runtime features) refine.
        deciding = decide_limits and not at_allocation
        facts = self.policy_mode.facts()          # a value: one read for the whole decision
        asked = self._asked(spec, job.requested_procs)
        mode = mode_for(asked, policy, facts)[0] if deciding else "advise"
        # Only a soft --time-min reads the soft_risk quantile: asked of the same pass, only then.
        soft_risk = policy.soft_risk_for(facts.rule) if mode == "soft" else None
        answer, notes, kind, basis = first_estimate(models, self.recent, spec, job, risk, soft_risk)
        point, low, high, coverage, bound = answer.runtime_s, answer.low_s, answer.high_s, answer.coverage, answer.bound_s
        soft, calibrated = answer.soft_value_s, answer.bound_calibrated
        name, version, fallback = answer.model_name, answer.model_version, answer.fallback
        name, version = self._provenance(models, kind, spec.application, name, version, spec.cluster)
        explanation = list(answer.explanation) + notes

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
                low = high = soft = point       # no quantile: the soft --time-min plans with the point
                coverage, calibrated = 0.0, False
                name, version = self._provenance(models, "scaling", spec.application, f"scaling/{spec.application}",
                                                 getattr(scaling, "modeler", "1"))
                fallback = False
                explanation = [f"scaling model of {spec.application} at {at_request.nodes} nodes: {human(point)}"] + \
                    [line for line in explanation if not line.startswith("no history")]

        bound = max(bound, point)
        # What the job's comparable recent runs needed (the basis the answer was composed with,
        # sources.compose): the suggestion never goes below it, and a request below it is the
        # one warning about the request we give (hpcpredict.daemon.suggestion).
        runs = list(basis.runtimes) if not fallback else []
        time_limit = suggested_time_limit(bound, runs, floor_s=policy.min_time_limit_s)
        time_limit, capped = within_max_time(time_limit, spec.max_time_s, spec.partition)
        # The limits start from the suggestion (the bound, never below what recent runs needed), so
        # the sbatch line, `hpcpredict predict` and the job-output line name the same --time.
        predicted = Predicted(runtime_s=point, soft_s=soft, suggested_s=time_limit, low_s=low, high_s=high,
                              coverage=coverage, risk=risk, calibrated=calibrated, fallback=fallback)
        if deciding:
            decision = decide(asked, predicted, policy, facts, site_cap_s=self.config.request_bounds.max_time_s)
            if decision.limits.mode == "advise" and policy.mode != "advise":
                explanation.append(f"limits left as submitted: {decision.why}")
        else:
            decision = decide_at_allocation(asked, predicted, policy, facts, lower_time_limit=lower_time_limit,
                                            job_time_limit_s=job_time_limit_s,
                                            site_cap_s=self.config.request_bounds.max_time_s)
        limits, message = decision.limits, decision.user_message
        scope = basis.named() if runs else ""
        warning = request_warning(requested, runs, scope)
        if warning:
            explanation.append(warning)
        elif requested and not runs and ceil_minute(bound) > ceil_minute(requested):
            explanation.append(f"the job may outlive your request of {human(requested)}: "
                               f"{100 * (1 - risk):.0f} % of such jobs end within {human(bound)}")
        basis_line = suggestion_basis(time_limit, requested_s=requested, runs=runs, scope=scope,
                                      bound_s=bound, calibrated=calibrated, floor_s=policy.min_time_limit_s,
                                      risk=risk)
        if basis_line:
            explanation.append(basis_line)
        if capped:
            explanation.append(capped)
        explanation.extend(spec.warnings[:3])
        return Answer(runtime_s=point, low_s=low, high_s=high, coverage=coverage, bound_s=bound,
                      time_limit_s=time_limit, time_min_s=limits.time_min_s or 0, model_name=name, model_version=str(version),
                      fallback=fallback, application=spec.application, risk=risk,
                      explanation=tuple(explanation), comm_time_s=comm_time, feature_class=feature_class,
                      comm_model=comm_model, node_advice=advice, limits=limits, user_message=message)

    @staticmethod
    def _asked(spec: JobSpec, procs: int) -> JobAsk:
        """What the job asked for, as the decision (daemon/policy) reads it."""
        return JobAsk(time_limit_s=math.inf if spec.time_limit_unlimited else spec.time_limit_s,
                      time_min_s=spec.time_min_s, default_time_s=spec.default_time_s,
                      max_time_s=spec.max_time_s, procs=procs, user=spec.user, account=spec.account,
                      partition=spec.partition)

    def _comm(self, spec: JobSpec, models: ModelSet, at_allocation: bool):
        if not models.comm:
            return None, "", "", ["no communication model published"]
        model = models.comm.get(spec.cluster) or models.comm.get(SITE_KEY) or next(iter(models.comm.values()))
        comm = spec.comm
        # Called only for a job with a comm spec; the comm kind's place sets comm_request with models.comm.
        assert comm is not None and models.comm_request is not None
        request = models.comm_request(pattern=comm.pattern, message_bytes=comm.message_bytes, ntasks=spec.ntasks,
                              nodes=spec.nodes, ntasks_per_node=spec.ntasks_per_node,
                              distribution=spec.distribution, tasks_per_node=spec.tasks_per_node,
                              grid=comm.grid, peers=comm.peers, messages=comm.messages, seed=comm.seed)
        lines = []
        node_names = None
        if at_allocation and spec.node_list and models.placement is not None:
            try:
                node_names = expand_nodes(spec.node_list)
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
            rows = node_advice(scaling, requested_nodes=spec.nodes or 1,
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

