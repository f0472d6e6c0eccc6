"""The prediction service: what the daemon does, with no transport in it.

Plain values in (the hpcpredict.v1 request messages), plain values out (the reply messages),
errors of :mod:`hpcpredict.daemon.errors` raised. It knows nothing of gRPC or sockets: the
gRPC adapter (:mod:`.listeners.grpc_adapter`) and the local socket (:mod:`.listeners.local_socket`) are
thin adapters that decode a request, say who calls, and map the errors below to their own replies:

=========================  ===================  ==========================================
error                      status name          meaning
=========================  ===================  ==========================================
InvalidRequest             INVALID_ARGUMENT     a field is wrong; the message names it
PermissionDenied           PERMISSION_DENIED    the caller may not make this call
StoreError                 UNAVAILABLE          not stored, so never acknowledged
other HpcPredictError      FAILED_PRECONDITION
anything else (a bug)      INTERNAL             logged with its traceback
=========================  ===================  ==========================================

Who calls is the caller's uid as the transport learned it from the kernel (SO_PEERCRED on
the connection that carries the call), or None when it cannot know. Every call goes through
:meth:`PredictionService.call`, which checks who may make it (:data:`RPCS`), times and
counts it and keeps the fault board:

* anyone: ``Predict`` about their own jobs. An unprivileged caller's ``job.user`` must be
  empty (then it becomes the caller's user name) or the caller's user name, so a prediction,
  and its explanation drawn from that user's history, never shows another user's jobs; what
  the store keeps of such Predicts is bounded per uid (:mod:`.quotas`), the answer never is;
* history writers (root, the daemon's own user, ``[daemon] slurm_user``, ``admin_users``):
  also the calls that write history, and ``Predict`` for any user (the submit hook);
* admins (root, the daemon's own user, ``[daemon] admin_users``): also the admin calls.

``JobRecord`` and ``UserReport`` (what ``explain`` and ``report`` read): anyone, about their
own jobs only (another user's job or report is refused); history writers and admins, about
anyone's (:mod:`.job_records`, which also bounds them).
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import os
import pwd
import threading
import time
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import __version__, job_records, records
from .buildinfo import build
from .errors import HpcPredictError, InvalidRequest, PermissionDenied, StoreError
from .faults import FaultBoard
from .forecast import when as forecast_when
from .forecast.belief import belief_from_interval
from .forecast.keeper import ForecastKeeper, stored_belief
from .forecast.probes import planned_length_s
from .policy.controller import PolicyMode
from .jobspec import job_spec_from_request, stored_request
from .quotas import ROW_BYTES, StoreCap, StoredBytesBudget
from .records import JobRecord
from .runtime.report import MAX_LINES, parse_feature_lines
from .runtime.values import MAX_KEY_CHARS
from .store import PredictionRow
from ..proto.v1 import hpcpredict_pb2 as pb
from ..topology.hostlist import count as count_hosts

if TYPE_CHECKING:   # the seams of the request path, for the checker: the service drives these
    from google.protobuf.message import Message

    from .config import Config
    from .engine import Answer, PredictionEngine
    from .jobspec import JobSpec
    from .listeners import Metrics
    from .model_set import ModelSet
    from .store import Store

logger = logging.getLogger(__name__)

STATES = frozenset({records.COMPLETED, records.FAILED, records.CANCELLED, records.TIMEOUT,
                    records.OUT_OF_MEMORY, records.NODE_FAIL, "PREEMPTED", "BOOT_FAIL", "DEADLINE"})

ANYONE, HISTORY_WRITER, ADMIN = "anyone", "history writer", "admin"

#: ``<key>@t``: when runtime feature ``key`` was reported, seconds since the job started (the
#: run tables' column name, :mod:`.lab.runtime.dataset`)
REPORT_TIME_SUFFIX = "@t"
#: The raw feature lines one ReportRuntimeFeatures may carry (the Slurm epilog sends at most
#: its ``features_max_bytes``, 64 KiB by default)
MAX_FEATURES_TEXT_CHARS = 1 << 20

#: RPC name -> (method of the service, who may call it)
RPCS = {
    "Predict": ("predict", ANYONE),
    "PredictAtAllocation": ("predict_at_allocation", HISTORY_WRITER),   # records the prediction
    "ReportOutcome": ("report_outcome", HISTORY_WRITER),
    "ReportRuntimeFeatures": ("report_runtime_features", HISTORY_WRITER),
    "ReloadModels": ("reload_models", ADMIN),
    "ListModels": ("list_models", ADMIN),
    "GetStatus": ("get_status", ADMIN),
    "JobRecord": ("job_record", ANYONE),        # about the caller's own jobs (job_records.py)
    "UserReport": ("user_report", ANYONE),
    "When": ("when", ANYONE),            # whose job: checked by when(), against the queue's owner
}
#: The calls answered for a reader: the caller's user name, None when privileged (job_records.py)
_READS = frozenset({"job_record", "user_report"})


def _value_message(value) -> pb.Value:
    if isinstance(value, bool):
        return pb.Value(flag=value)
    if isinstance(value, float):
        return pb.Value(number=value)
    return pb.Value(text=str(value))


def uids_of(names) -> frozenset[int]:
    """root, the daemon's own user, and those of ``names`` that exist on this host."""
    uids = {0, os.getuid()}
    for name in names:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            logger.debug("user %s does not exist here", name)
    return frozenset(uids)


@lru_cache(maxsize=4096)
def user_name(uid: int) -> str | None:
    """The login name of ``uid`` (cached: with LDAP behind NSS a lookup can take milliseconds)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def status_name(error: BaseException) -> str:
    """The status an adapter answers for ``error`` (gRPC status code names)."""
    if isinstance(error, InvalidRequest):
        return "INVALID_ARGUMENT"
    if isinstance(error, PermissionDenied):
        return "PERMISSION_DENIED"
    if isinstance(error, StoreError):
        return "UNAVAILABLE"
    if isinstance(error, HpcPredictError):
        return "FAILED_PRECONDITION"
    return "INTERNAL"


def error_message(method: str, error: BaseException) -> str:
    """What the caller is told about ``error`` (never a traceback)."""
    if isinstance(error, StoreError):
        return f"store unavailable: {error}"
    if isinstance(error, HpcPredictError):
        return str(error)
    return f"internal error in {method}: {type(error).__name__}"


def estimate_message(answer: Answer, prediction_id: str, start_phrase: str = "") -> pb.Estimate:
    """``start_phrase``: what ``[forecast] sbatch_line`` adds to the user's line."""
    message = pb.Estimate(
        prediction_id=prediction_id, runtime_s=answer.runtime_s,
        interval=pb.Interval(low_s=answer.low_s, high_s=answer.high_s, coverage=answer.coverage),
        suggested_time_limit_s=answer.time_limit_s, suggested_time_min_s=answer.time_min_s,
        explanation=answer.explanation, model_name=answer.model_name, model_version=answer.model_version,
        fallback=answer.fallback, feature_class=answer.feature_class, risk=answer.risk,
        application=answer.application, comm_model=answer.comm_model,
        apply_time_limit_s=answer.limits.time_limit_s or 0, apply_time_min_s=answer.limits.time_min_s or 0,
        policy_mode=answer.limits.mode, policy_reason=answer.limits.reason, user_message=answer.user_message + start_phrase,
        node_advice=[pb.NodeAdvice(nodes=r.nodes, runtime_s=r.runtime_s, node_hours=r.node_hours,
                                   efficiency=r.efficiency, recommended=r.recommended) for r in answer.node_advice])
    if answer.comm_time_s is not None:
        message.comm_time_s = answer.comm_time_s
    return message


class PredictionService:
    def __init__(self, engine: PredictionEngine, store: Store, metrics: Metrics, config: Config):
        self.engine = engine
        self.store = store
        self.metrics = metrics
        self.faults: FaultBoard = engine.faults
        self.request_bounds = config.request_bounds
        self.slurm_user = config.daemon.slurm_user
        self.admin_uids = uids_of(config.daemon.admin_users)
        self.writer_uids = self.admin_uids | uids_of([self.slurm_user] if self.slurm_user else [])
        self.clusters = tuple(config.daemon.clusters)
        self.started = time.time()
        self._requests = 0
        self._fallbacks = 0
        # (method, code) -> (counter, histogram) children: labels() once
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        # Prediction ids must not be guessable (an id fetches the job's stored request): a keyed
        # hash of a counter, with a key drawn once, costs no system call per Predict.
        self._id_key = os.urandom(32)
        self._id_counter = itertools.count()
        self._replaying = threading.Lock()
        store.events = self   # its journal's faults, through the store's own StoreEvents: it knows no more of us
        # What is kept of Predicts (quotas.py): ordinary users' rows within a byte budget each,
        # everybody's within the store's cap.
        self.user_budget = StoredBytesBudget(config.store.user_stored_kib_per_hour << 10)
        writer_budget = config.store.writer_stored_kib_per_hour << 10
        self.writer_budget = StoredBytesBudget(writer_budget) if writer_budget else None
        self.store_cap = StoreCap(store.files(), config.store.max_store_mib << 20, config.store.min_free_mib << 20)
        # A policy mode that needs no controller leaves its facts (the cluster's size) unread: the
        # forecast then reads its own copy, never the facts the limits are decided on.
        controller = engine.policy_mode if engine.policy_mode.needs_controller else PolicyMode(config.policy)
        self.forecast = ForecastKeeper(
            config.forecast, facts=controller.facts, belief_of=self._belief_of,
            refresh_facts=None if controller is engine.policy_mode else controller.refresh,
            facts_every_s=config.policy.controller_check_s)
        # Past the cap the hooks' rows keep a compact request: no environment, no script, inputs kept.
        # What ordinary users' JobRecord / UserReport calls may cost (job_records.py): calls a minute.
        # (a bucket of so many a minute: quotas' hourly bucket on a clock sixty times as fast)
        self.read_budget = StoredBytesBudget(job_records.RECORD_CALLS_PER_MINUTE, clock=lambda: time.monotonic() * 60)
        self._compact_bounds = replace(self.request_bounds, stored_request_bytes=min(16384, self.request_bounds.stored_request_bytes),
                                       stored_script_bytes=0)

    # ------------------------------------------------------------------ dispatch
    def privileged(self, caller_uid: int | None) -> bool:
        """May this caller write history and ask about any user's jobs?"""
        return caller_uid in self.writer_uids

    def call(self, method: str, request: Message, caller_uid: int | None) -> Message:
        """Answer ``request`` for RPC ``method`` made by ``caller_uid`` (None: unknown);
        raises the errors in the module docstring."""
        start = time.perf_counter()
        code = "OK"
        try:
            name, who = RPCS[method]
            self._authorize(method, who, request, caller_uid)
            if name in _READS:
                answer = getattr(self, name)(request, reader=self._reader(method, name, caller_uid))
            elif name == "predict" and caller_uid not in self.writer_uids:   # an ordinary user's own: budgeted
                answer = self.predict(request, budget_uid=caller_uid)
            elif name == "when":
                answer = self.when(request, caller_uid)
            elif name in ("predict", "predict_at_allocation"):     # a history writer's: budgeted apart
                answer = getattr(self, name)(request, writer_uid=-1 if caller_uid is None else caller_uid)
            else:
                answer = getattr(self, name)(request)
            self.faults.clear("store", method)
            return answer
        except StoreError as error:
            code = status_name(error)
            self.faults.set("store", method, str(error))
            raise
        except HpcPredictError as error:
            code = status_name(error)
            raise
        except Exception:
            code = "INTERNAL"
            logger.exception("%s failed", method)
            raise
        finally:
            self._requests += 1
            self._observe(method, code, time.perf_counter() - start)

    def _authorize(self, method: str, who: str, request: Any, caller_uid: int | None) -> None:
        if who == ADMIN:
            if caller_uid not in self.admin_uids:
                raise PermissionDenied(f"{method} is an admin call: make it as root or an [daemon] admin_users user")
            return
        if caller_uid in self.writer_uids:
            return
        if who == HISTORY_WRITER:
            raise PermissionDenied(f"{method} writes job history: only root, the Slurm user "
                                   f"({self.slurm_user or 'none configured'}) or an admin may call it")
        if RPCS[method][0] in _READS:
            return      # the reader's own rows only: job_records.py
        if method == "When":   # the job's owner is in the queue, not in the request: when() checks it
            return
        # Predict from an ordinary user: about that user's own jobs, and nobody else's
        name = user_name(caller_uid) if caller_uid is not None else None
        if name is None:
            raise PermissionDenied(f"{method}: the caller's user is not known here, so it may not predict")
        if not request.job.user:
            request.job.user = name
        elif request.job.user != name:
            raise PermissionDenied(f"job.user: you ({name}) may only ask about your own jobs, "
                                   f"not {request.job.user!r}")
        # A job id is anyone's to type: only the hooks' (privileged) predictions are kept under one,
        # so a user's Predict never becomes the prediction another user's job is linked to.
        request.job_id = ""

    def _observe(self, method: str, code: str, seconds: float) -> None:
        children = self._children.get((method, code))
        if children is None:
            children = (self.metrics.requests.labels(method, code), self.metrics.latency.labels(method))
            self._children[(method, code)] = children
        children[0].inc()
        children[1].observe(seconds)

    # ------------------------------------------------------------------ state
    def reload(self) -> ModelSet:
        """Load the models again and replay the history (SIGHUP, ReloadModels, a store back)."""
        return self.engine.reload()

    # -- the store's events (store.StoreEvents)
    def journal_opened(self, error: str | None) -> None:
        if error is None:
            self.faults.clear("store", "open prediction journal")
        else:
            self.faults.set("store", "open prediction journal", error)

    def journal_committed(self, error: str | None) -> None:
        if error is None:
            self.faults.clear("store", "commit journaled predictions")
            self._store_answers()
        else:
            self.faults.set("store", "commit journaled predictions", error)

    def _store_answers(self) -> None:
        """A write went through: if the history could not be read before, replay it now."""
        if self.faults and self.faults.has("store", "history replay") and self._replaying.acquire(blocking=False):
            threading.Thread(target=self._replay, name="history-replay", daemon=True).start()

    def _replay(self) -> None:
        try:
            self.reload()   # sets or clears the "history replay" fault itself
        except Exception:
            logger.exception("history replay failed")
        finally:
            self._replaying.release()

    # ------------------------------------------------------------------ predictions
    def _new_prediction_id(self) -> str:
        return hashlib.blake2b(next(self._id_counter).to_bytes(8, "little"), key=self._id_key,
                               digest_size=16).hexdigest()

    @property
    def _default_cluster(self) -> str | None:
        """The cluster of a request naming none: the first configured (None: any)."""
        return self.clusters[0] if self.clusters else None

    def _served(self, spec: JobSpec) -> JobSpec:
        """``spec`` on one of the clusters this daemon serves: a request naming none is on the
        first configured one; one naming another cluster is refused (no list: any cluster)."""
        if not self.clusters:
            return spec
        if not spec.cluster:
            return replace(spec, cluster=self.clusters[0])
        if spec.cluster not in self.clusters:
            raise InvalidRequest("job.cluster", f"{spec.cluster!r} is not served here ({', '.join(self.clusters)})")
        return spec

    def _kept_request(self, request: pb.JobRequest, spec: JobSpec, budget_uid: int | None,
                      writer_uid: int | None = None) -> bytes | None:
        """What the prediction row keeps of ``request``: its bytes (b"": the row without them)
        or None (no row at all). ``budget_uid``: an ordinary user's own Predict; ``writer_uid``:
        a history writer's, on the writers' budget (quotas.py)."""
        cap = self.store_cap.reached()
        if cap is None:
            self.faults.clear("store", "size cap")
        else:
            self.faults.set("store", "size cap", f"{cap}: users' predictions not kept, the hooks' "
                                                 f"without environment and script; outcomes still stored")
        if budget_uid is None:
            kept = stored_request(request, spec, self._compact_bounds if cap else self.request_bounds)
            if writer_uid is None or self.writer_budget is None:
                return kept
            if self.writer_budget.choose(writer_uid, (ROW_BYTES + len(kept),)) == 0:
                self.faults.clear("store", "writers' stored bytes")
                return kept
            # past the budget only: the compact form is a second serialisation
            compact = kept if cap else stored_request(request, spec, self._compact_bounds)
            chosen = 1 + self.writer_budget.choose(writer_uid, (ROW_BYTES + len(compact), ROW_BYTES))
            self.metrics.predictions_not_kept.inc()
            self.faults.set("store", "writers' stored bytes",
                            f"uid {writer_uid} is past [store] writer_stored_kib_per_hour: its predictions are "
                            f"kept {'with a compact request' if chosen == 1 else 'without their requests'}")
            return compact if chosen == 1 else b""
        if cap:
            self.metrics.predictions_not_kept.inc()
            return None
        kept = stored_request(request, spec, self.request_bounds)
        allowed = self.user_budget.allow(budget_uid, ROW_BYTES + len(kept))
        if allowed != "request":
            self.metrics.predictions_not_kept.inc()
        return kept if allowed == "request" else b"" if allowed == "row" else None

    def _answer(self, spec: JobSpec, stage: str, at_allocation: bool, request: pb.JobRequest,
                budget_uid: int | None = None, writer_uid: int | None = None,
                allocation: pb.AllocationRequest | None = None, submitted: PredictionRow | None = None) -> pb.Estimate:
        """Estimate ``spec``, record the prediction, answer. ``allocation``: PrologSlurmctld's
        request, whose read-back of the job (the TimeLimit it starts under, its TimeMin) is
        stored beside what the daemon decides. ``submitted``: the job's submission prediction,
        whose suggested --time this answer repeats (one answer per job: the sbatch line, the job
        output, ``explain`` and ``report`` name the same --time)."""
        spec = self._served(spec)
        started_limit = started_min = None
        if allocation is None:
            answer = self.engine.estimate(spec, at_allocation=at_allocation, decide_limits=stage == "submit")
        else:
            # bounded like every runtime here: a value past the site cap is no limit this daemon set or reads
            started_limit, started_min = (value if 0 < value <= self.request_bounds.max_time_s else None
                                          for value in (allocation.job_time_limit_s, allocation.job_time_min_s))
            answer = self.engine.estimate(spec, at_allocation=True, decide_limits=False,
                                          lower_time_limit=allocation.lower_time_limit,
                                          job_time_limit_s=started_limit or 0)
        if submitted is not None and submitted.suggested_time_limit_s:
            answer = replace(answer, time_limit_s=submitted.suggested_time_limit_s)
        # [forecast] sbatch_line: a look-up in the kept probe table (forecast/probes.py), never a forecast
        phrase = self.forecast.sbatch_phrase(spec.ntasks * spec.cpus_per_task or spec.nodes or 1,
                                             planned_length_s(answer.limits, spec)) \
            if stage == "submit" and answer.user_message and self.forecast.config.sbatch_line else ""
        prediction_id = self._new_prediction_id()
        if answer.fallback:
            self.metrics.fallbacks.inc()
            self._fallbacks += 1
        kept = self._kept_request(request, spec, budget_uid, writer_uid)
        if kept is None:   # past the user's budget or the store's cap: answered, not kept
            return estimate_message(answer, "", phrase)
        try:
            self.store.record_prediction(PredictionRow(
                prediction_id=prediction_id, job_id=spec.job_id, stage=stage, user=spec.user,
                application=spec.application, created=time.time(), runtime_s=answer.runtime_s,
                low_s=answer.low_s, high_s=answer.high_s, bound_s=answer.bound_s,
                requested_time_s=float(spec.time_limit_s), comm_time_s=answer.comm_time_s,
                model_name=answer.model_name, model_version=answer.model_version, fallback=answer.fallback,
                request=kept, cluster=spec.cluster,
                decided_time_limit_s=answer.limits.time_limit_s, decided_time_min_s=answer.limits.time_min_s,
                policy_mode=answer.limits.mode, policy_reason=answer.limits.reason,
                started_time_limit_s=started_limit, started_time_min_s=started_min,
                suggested_time_limit_s=answer.time_limit_s or None))
        except StoreError as error:
            # The estimate is still right; only its record is missing. Answer, flag the fault.
            self.faults.set("store", "record prediction", str(error))
            logger.error("prediction %s not recorded: %s", prediction_id, error)
            prediction_id = ""
        else:
            if self.faults.clear("store", "record prediction"):
                self._store_answers()
        return estimate_message(answer, prediction_id, phrase)

    def predict(self, request: pb.JobRequest, budget_uid: int | None = None,
                writer_uid: int | None = None) -> pb.Estimate:
        request = self._as_slurm_fills_it(request)
        spec = job_spec_from_request(request, self.request_bounds)
        return self._answer(spec, "submit", False, request, budget_uid, writer_uid)

    def _as_slurm_fills_it(self, request: pb.JobRequest) -> pb.JobRequest:
        """``request`` with what sbatch fills in for an empty partition or account, and the
        partition's MaxTime/DefaultTime (policy/slurm_defaults.py), so that `hpcpredict predict`
        is decided as the submission will be; what the request gives (the hook's values) is kept."""
        job = request.job
        filled = self.engine.slurm_defaults.current().complete(
            user=job.user, account=job.account, partition=job.partition, max_time_s=request.max_time_s,
            default_time_s=request.default_time_s)
        if filled == (job.account, job.partition, request.max_time_s, request.default_time_s):
            return request
        completed = pb.JobRequest()
        completed.CopyFrom(request)
        completed.job.account, completed.job.partition, completed.max_time_s, completed.default_time_s = filled
        return completed

    def predict_at_allocation(self, request: pb.AllocationRequest, writer_uid: int | None = None) -> pb.Estimate:
        if not request.node_list:
            raise InvalidRequest("node_list", "required at allocation")
        job_request = request.request
        submitted = None
        if request.prediction_id:
            try:
                submitted = self.store.prediction(request.prediction_id)
            except StoreError as error:     # the refined answer still serves; only the repeat is lost
                logger.warning("submission prediction %s not read: %s", request.prediction_id, error)
        if not job_request.job.user and request.prediction_id:
            # The prolog may send only ids: the submission's own request says who and what.
            job_request, submitted = self._stored_request(request.prediction_id)
        spec = job_spec_from_request(job_request, self.request_bounds, node_list=request.node_list,
                                     job_id=request.job_id, tasks_per_node=request.tasks_per_node)
        if submitted is not None and (submitted.stage != "submit" or submitted.user != spec.user
                                      or submitted.job_id not in ("", spec.job_id)):
            submitted = None     # an id read from the job's AdminComment: only its own submission counts
        return self._answer(spec, "allocation", True, job_request, writer_uid=writer_uid, allocation=request,
                            submitted=submitted)

    def _stored_request(self, prediction_id: str) -> tuple[pb.JobRequest, PredictionRow]:
        """The JobRequest a stored prediction was made for, and its row."""
        row = self.store.prediction(prediction_id)
        if row is None or not row.request:
            raise InvalidRequest("prediction_id", f"unknown prediction {prediction_id!r}")
        return pb.JobRequest.FromString(row.request), row

    def report_outcome(self, request: pb.Outcome) -> pb.OutcomeAck:
        record, prediction_id = self._outcome_record(request)
        stored = self.store.record_outcome(record, prediction_id=prediction_id, node_list=request.node_list)
        self._store_answers()
        if stored:
            self.engine.observe(record)
            self.metrics.outcomes.labels(record.state).inc()
        return pb.OutcomeAck(stored=True, job_id=record.job_id, duplicate=not stored)

    def _outcome_record(self, outcome: pb.Outcome) -> tuple[JobRecord, str]:
        if not outcome.job_id:
            raise InvalidRequest("job_id", "required")
        if len(outcome.job_id) > 128:
            raise InvalidRequest("job_id", "longer than 128 characters")
        state = outcome.state.upper().split()[0] if outcome.state.strip() else ""
        if state not in STATES:
            raise InvalidRequest("state", f"unknown final state {outcome.state!r}")
        elapsed = outcome.elapsed_s or (outcome.end_time - outcome.start_time if outcome.end_time and outcome.start_time else -1)
        if not 0 <= elapsed <= self.request_bounds.max_time_s:
            raise InvalidRequest("elapsed_s", f"{elapsed} is not a runtime in seconds")
        row = self._linked_prediction(outcome)
        prediction_id = row.prediction_id if row is not None else ""
        request = outcome.request
        if row is not None and row.request:
            # The same user's prediction of this job: its request carries the script and inputs.
            request = pb.JobRequest.FromString(row.request)
        request = self._with_reported_features(request, outcome)
        spec = self._served(job_spec_from_request(request, self.request_bounds, job_id=outcome.job_id))
        allocated = {}
        if not spec.nodes and outcome.node_list:
            # Submitted without -N: the history keeps the node count Slurm allocated, not 0.
            nodes = count_hosts(outcome.node_list)
            if 0 < nodes <= self.request_bounds.max_nodes:
                allocated = {"nodes": nodes, "requested_procs": spec.ntasks * spec.cpus_per_task or nodes}
        record = spec.record(submit_time=float(outcome.submit_time or spec.submit_time), runtime_s=float(elapsed),
                             start_time=float(outcome.start_time or -1), end_time=float(outcome.end_time or time.time()),
                             state=state, exit_code=int(outcome.exit_code), **allocated)
        return record, prediction_id

    def _linked_prediction(self, outcome: pb.Outcome) -> PredictionRow | None:
        """The prediction ``outcome`` belongs to: the one it names, else (the hooks' AdminComment
        field was rewritten by a site tool) the latest one its job got after its submission.
        Only a prediction of the outcome's own user (``request.job.user``) and job: an id or a job
        id read from what a user controls must never tie this job to another user's prediction,
        whose stored request would then describe it. An outcome naming no user is linked only by
        the id its (privileged) caller gives, and then takes its user from that prediction."""
        user = outcome.request.job.user or None
        if outcome.prediction_id:
            row = self.store.prediction(outcome.prediction_id)
        elif user is not None:
            row = self.store.prediction_for_job(outcome.job_id, since=float(outcome.submit_time or 0), user=user,
                                                cluster=outcome.request.job.cluster or self._default_cluster)
        else:
            return None
        if row is None:
            return None
        if (user is not None and row.user != user) or row.job_id not in ("", outcome.job_id):
            logger.warning("outcome of job %r (user %r) not linked to prediction %s of job %r (user %r)",
                           outcome.job_id, user or "", row.prediction_id, row.job_id, row.user)
            return None
        return row

    def _with_reported_features(self, request: pb.JobRequest, outcome: pb.Outcome) -> pb.JobRequest:
        """``request`` plus the runtime features the job reported (its latest prediction, when
        that is a ``runtime-features`` one made after its submission); the outcome stays linked
        to the prediction made before the job ran, which is what accuracy is measured on."""
        cluster = request.job.cluster or self._default_cluster
        row = self.store.prediction_for_job(outcome.job_id, since=float(outcome.submit_time or 0), cluster=cluster,
                                            user=request.job.user)
        if row is None or row.stage != "runtime-features" or not row.request:
            return request
        merged = pb.JobRequest()
        merged.CopyFrom(request)
        for key, value in pb.JobRequest.FromString(row.request).inputs.items():
            merged.inputs[key].CopyFrom(value)
        return merged

    def report_runtime_features(self, request: pb.RuntimeFeatures) -> pb.Estimate:
        """Re-predict a job with the runtime features it reported (``features`` and/or the raw
        protocol lines of ``text``, parsed here by the one parser of the protocol) and record
        that prediction (stage ``runtime-features``): its request carries each feature's last
        value and, as ``<key>@t``, when it was reported; the job's outcome takes both into its
        history (:meth:`_outcome_record`), so they become training rows."""
        if len(request.text) > MAX_FEATURES_TEXT_CHARS:
            raise InvalidRequest("text", f"longer than {MAX_FEATURES_TEXT_CHARS} characters")
        if not request.prediction_id:
            row = self.store.prediction_for_job(request.job_id, cluster=self._default_cluster)
            if row is None:
                raise InvalidRequest("prediction_id", f"required (no prediction of job {request.job_id!r} is stored)")
            prediction_id = row.prediction_id
        else:
            prediction_id = request.prediction_id
        job, row = self._stored_request(prediction_id)
        reported: dict[str, tuple[pb.Value, float]] = {}
        for feature in request.features:
            if not feature.key or feature.key.endswith(REPORT_TIME_SUFFIX):
                raise InvalidRequest("features.key", f"required, and not ending in {REPORT_TIME_SUFFIX!r}")
            reported[feature.key] = (feature.value, feature.at_s)
        for feature in parse_feature_lines(request.text, max_lines=MAX_LINES) if request.text else ():
            if not feature.key.endswith(REPORT_TIME_SUFFIX):
                reported[feature.key] = (_value_message(feature.value), feature.at_s)
        if len(reported) > self.request_bounds.max_inputs:
            raise InvalidRequest("features", f"more than {self.request_bounds.max_inputs}")
        for key, (value, at_s) in reported.items():
            job.inputs[key].CopyFrom(value)
            if at_s >= 0 and len(key) + len(REPORT_TIME_SUFFIX) <= MAX_KEY_CHARS:
                job.inputs[key + REPORT_TIME_SUFFIX].number = float(at_s)
        spec = job_spec_from_request(job, self.request_bounds, job_id=request.job_id or row.job_id)
        return self._answer(spec, "runtime-features", False, job)

    # ------------------------------------------------------------------ records
    def _reader(self, method: str, name: str, caller_uid: int | None) -> str | None:
        """Whose rows a read call gets: None (everyone's) for a privileged caller, else the
        caller's own user name, within the per-uid budget of read calls."""
        if caller_uid in self.writer_uids:
            return None
        reader = user_name(caller_uid) if caller_uid is not None else None
        if reader is None or caller_uid is None:
            raise PermissionDenied(f"{method}: the caller's user is not known here, so no records are read for it")
        cost = job_records.REPORT_COST if name == "user_report" else 1
        if self.read_budget.choose(caller_uid, (cost,)) != 0:
            raise HpcPredictError(f"{method}: too many record requests from {reader}: at most "
                                  f"{job_records.RECORD_CALLS_PER_MINUTE} a minute (a report counts "
                                  f"{job_records.REPORT_COST}); try again in a minute")
        return reader

    def job_record(self, request: pb.JobRecordRequest, reader: str | None = None) -> pb.JobRecordReply:
        if not request.job_id or len(request.job_id) > 128:
            raise InvalidRequest("job_id", "required, at most 128 characters")
        data = job_records.read_job_record(self.store, request.job_id, cluster=request.cluster or None,
                                           history=request.history, reader=reader)
        return job_records.record_reply(data)

    def user_report(self, request: pb.UserReportRequest, reader: str | None = None) -> pb.UserReportReply:
        if request.by not in ("", "user", "account"):
            raise InvalidRequest("by", f"user or account, not {request.by!r}")
        cap = job_records.MAX_REPORT_ROWS
        rows = job_records.read_report_rows(self.store, user=request.user or None, account=request.account or None,
                                            since=request.since or None, cluster=request.cluster or None,
                                            reader=reader, limit=cap)
        suggestions = job_records.latest_suggestions(self.store, self.engine.estimate, rows, request.by or "user")
        return job_records.report_reply(rows, suggestions, cap)
    # ------------------------------------------------------------------ start-time forecast
    def when(self, request: pb.WhenRequest, caller_uid: int | None) -> pb.StartEstimate:
        """When will a job start: ``job_id`` (the caller's own, or anyone's for a privileged
        caller) from the kept forecast, or ``request`` (a job not yet submitted, as Predict's)."""
        name = user_name(caller_uid) if caller_uid is not None else None
        privileged = self.privileged(caller_uid)
        if not privileged and name is None:
            raise PermissionDenied("When: the caller's user is not known here")
        if request.job_id:
            return forecast_when.submitted(self.forecast, request.job_id, name, privileged)
        if not request.HasField("request"):
            raise InvalidRequest("job_id", "give a job id, or request (a job not yet submitted)")
        job = request.request
        if not job.job.user:
            job.job.user = name or ""
        elif job.job.user != name and not privileged:
            raise PermissionDenied(f"request.job.user: you ({name}) may only ask about your own jobs, "
                                   f"not {job.job.user!r}")
        spec = self._served(job_spec_from_request(job, self.request_bounds))
        return forecast_when.hypothetical(self.forecast, spec, self._spec_belief(spec),
                                          -1 if caller_uid is None else caller_uid)

    def _belief_of(self, job):
        """A queued job's runtime belief: the hooks' stored prediction, else the walltime model now."""
        stored = stored_belief(self.store, job)
        if stored is not None:
            return stored
        return self._spec_belief(forecast_when.spec_of(job, self._default_cluster or ""))

    def _spec_belief(self, spec):
        answer = self.engine.estimate(spec, decide_limits=False)
        if answer.fallback:          # no model knows it: the forecast runs it to its limit
            return None
        return belief_from_interval(answer.runtime_s, answer.low_s, answer.high_s, answer.coverage)

    # ------------------------------------------------------------------ admin
    def _model_infos(self) -> list[pb.ModelInfo]:
        bundled = self.engine.registry.bundled
        return [pb.ModelInfo(kind=artifact.kind, key=artifact.key, version=artifact.version,
                             created=artifact.created, path=str(artifact.path), serving=True,
                             metadata={k: str(v) for k, v in artifact.metadata.items()},
                             bundled=bundled is not None and bundled in artifact.path.parents)
                for artifact in self.engine.describe()]

    def reload_models(self, request: pb.ReloadRequest | None = None) -> pb.ReloadReply:
        models = self.reload()
        return pb.ReloadReply(models=self._model_infos(), errors=list(models.errors))

    def list_models(self, request: pb.ListModelsRequest | None = None) -> pb.ModelList:
        return pb.ModelList(models=self._model_infos())

    def get_status(self, request: pb.StatusRequest | None = None) -> pb.Status:
        try:
            counts = self.store.counts()
            accuracy = self.store.recent_accuracy()
            self.faults.clear("store", "read status")
        except StoreError as error:
            self.faults.set("store", "read status", str(error))
            counts, accuracy = {"jobs": 0, "outcomes": 0, "predictions": 0}, {}
        controller = self.engine.policy_mode
        facts = controller.facts()
        build_info = build()
        mode, why = controller.current()
        return pb.Status(version=__version__, uptime_s=time.time() - self.started, models=self._model_infos(),
                         jobs=counts["jobs"], outcomes=counts["outcomes"], predictions=counts["predictions"],
                         faults=self.faults.lines(), recent_accuracy=accuracy,
                         store=getattr(self.store, "path", ""), requests=self._requests, fallbacks=self._fallbacks,
                         policy_mode=mode, policy_reason=why, slurm_release=facts.release_text,
                         planning_rule=facts.rule, total_cpus=min(facts.total_cpus, 2**32 - 1),
                         total_nodes=min(facts.total_nodes, 2**32 - 1),
                         build=pb.Build(version=build_info["version"], commit=build_info["commit"]))
