"""The gRPC servicer: thin — validate, ask the engine, store, answer.

Bad input → ``INVALID_ARGUMENT`` naming the field; overload → ``RESOURCE_EXHAUSTED`` at once;
an outcome that could not be stored → ``UNAVAILABLE`` (never acknowledged unless on disk);
admin RPCs from anyone but root/admin users → ``PERMISSION_DENIED``.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import os
import threading
import time

import grpc

from hpcpredict.daemon import records
from hpcpredict.daemon.errors import HpcPredictError, InvalidRequest, StoreError
from hpcpredict.daemon.jobspec import job_spec_from_request
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.store import PredictionRow
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc

logger = logging.getLogger(__name__)

class AbortCall(Exception):
    """Raised by :meth:`CallContext.abort`, as gRPC Python's ``context.abort`` raises."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code, self.details = code, details


class CallContext:
    """The part of ``grpc.ServicerContext`` the servicer uses, for the servers that are not gRPC
    Python (the native front end, the Slurm hook socket): ``peer()`` names the caller and
    ``abort()`` raises :class:`AbortCall`; the rest answers as a call without metadata would."""

    def __init__(self, peer: str, deadline: float | None = None):
        self._peer = peer
        self._deadline = deadline
        self.code = None
        self.details = ""

    def peer(self) -> str:
        return self._peer

    def abort(self, code: grpc.StatusCode, details: str):
        raise AbortCall(code, details)

    def set_code(self, code) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def invocation_metadata(self):
        return ()

    def is_active(self) -> bool:
        return True

    def time_remaining(self):
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def add_callback(self, callback) -> bool:
        return False

    def set_trailing_metadata(self, metadata) -> None:
        pass

    def send_initial_metadata(self, metadata) -> None:
        pass


STATES = frozenset({records.COMPLETED, records.FAILED, records.CANCELLED, records.TIMEOUT,
                    records.OUT_OF_MEMORY, records.NODE_FAIL, "PREEMPTED", "BOOT_FAIL", "DEADLINE"})


def estimate_message(answer, prediction_id: str) -> pb.Estimate:
    message = pb.Estimate(
        prediction_id=prediction_id, runtime_s=answer.runtime_s,
        interval=pb.Interval(low_s=answer.low_s, high_s=answer.high_s, coverage=answer.coverage),
        suggested_time_limit_s=answer.time_limit_s, suggested_time_min_s=answer.time_min_s,
        explanation=answer.explanation, model_name=answer.model_name, model_version=answer.model_version,
        fallback=answer.fallback, feature_class=answer.feature_class, risk=answer.risk,
        application=answer.application, comm_model=answer.comm_model,
        node_advice=[pb.NodeAdvice(nodes=r.nodes, runtime_s=r.runtime_s, node_hours=r.node_hours,
                                   efficiency=r.efficiency, recommended=r.recommended) for r in answer.node_advice])
    if answer.comm_time_s is not None:
        message.comm_time_s = answer.comm_time_s
    return message


class PredictorServicer(pb_grpc.PredictorServicer):
    def __init__(self, engine, store, metrics, config, *, is_admin=None):
        self.engine = engine
        self.store = store
        self.metrics = metrics
        self.config = config
        self.limits = config.limits
        self.started = time.time()
        self._is_admin = is_admin or (lambda context: False)
        self._counters = {"requests": 0, "fallbacks": 0}
        self._children: dict = {}   # (method, code) -> (counter, histogram) children: labels() once
        # Prediction ids must not be guessable (an id fetches the job's stored request): a keyed
        # hash of a counter, with a key drawn once, costs no system call per Predict.
        self._id_key = os.urandom(32)
        self._id_counter = itertools.count()
        store.on_fault = self._store_fault   # journaled predictions that the store refuses to take

    def _new_prediction_id(self) -> str:
        return hashlib.blake2b(next(self._id_counter).to_bytes(8, "little"), key=self._id_key,
                               digest_size=16).hexdigest()

    def _store_fault(self, message: str | None) -> None:
        if message is None:
            self.clear_fault("store")
        else:
            self.set_fault("store", message)

    # ------------------------------------------------------------------ faults
    def set_fault(self, component: str, message: str) -> None:
        """Report a fault in GetStatus and the ``hpcpredict_fault`` gauge (until cleared)."""
        if self.engine.faults.get(component) != message:
            self.engine.faults[component] = message
            self.metrics.set_faults(self.engine.faults)

    def clear_fault(self, component: str) -> None:
        if self.engine.faults.pop(component, None) is None:
            return
        self.metrics.set_faults(self.engine.faults)
        logger.warning("fault cleared: %s", component)
        if component == "store":
            # The store is back: replay its history (it may never have been read) off the hot path.
            threading.Thread(target=self._reload_quietly, name="store-recovered", daemon=True).start()

    def _reload_quietly(self) -> None:
        try:
            models = self.engine.reload()
            self.metrics.set_models(models.artifacts)
        except Exception:  # a failed replay is reported through faults by the engine
            logger.exception("reload after store recovery failed")
        self.metrics.set_faults(self.engine.faults)

    def _observe(self, method: str, code: str, seconds: float) -> None:
        children = self._children.get((method, code))
        if children is None:
            children = (self.metrics.requests.labels(method, code), self.metrics.latency.labels(method))
            self._children[(method, code)] = children
        children[0].inc()
        children[1].observe(seconds)

    # ------------------------------------------------------------------ helpers
    def _run(self, method: str, context, body):
        """Timing, metrics and error mapping — shared by every RPC."""
        # Concurrency is bounded where calls arrive: gRPC's maximum_concurrent_rpcs (server.py)
        # and the hook server's own worker pool answer "busy" at once past their limits.
        start = time.perf_counter()
        code = "OK"
        try:
            return body()
        except InvalidRequest as error:
            code = "INVALID_ARGUMENT"
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        except StoreError as error:
            code = "UNAVAILABLE"
            self.set_fault("store", str(error))
            context.abort(grpc.StatusCode.UNAVAILABLE, f"store unavailable: {error}")
        except HpcPredictError as error:
            code = "FAILED_PRECONDITION"
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(error))
        except Exception as error:
            if isinstance(error, (grpc.RpcError, AbortCall)) or type(error).__name__ == "_AbortError":
                code = "ABORTED_BY_HANDLER"
                raise
            code = "INTERNAL"
            logger.exception("%s failed", method)
            context.abort(grpc.StatusCode.INTERNAL, f"internal error in {method}: {type(error).__name__}")
        finally:
            self._counters["requests"] += 1
            self._observe(method, code, time.perf_counter() - start)

    def _answer(self, spec, stage: str, at_allocation: bool, request: pb.JobRequest) -> pb.Estimate:
        answer = self.engine.estimate(spec, at_allocation=at_allocation)
        prediction_id = self._new_prediction_id()
        if answer.fallback:
            self.metrics.fallbacks.inc()
            self._counters["fallbacks"] += 1
        try:
            self.store.record_prediction(PredictionRow(
                prediction_id=prediction_id, job_id=spec.job_id, stage=stage, user=spec.user,
                application=spec.application, created=time.time(), runtime_s=answer.runtime_s,
                low_s=answer.low_s, high_s=answer.high_s, bound_s=answer.bound_s,
                requested_time_s=float(spec.time_limit_s), comm_time_s=answer.comm_time_s,
                model_name=answer.model_name, model_version=answer.model_version, fallback=answer.fallback,
                request=request.SerializeToString()))
            if "store" in self.engine.faults:
                self.clear_fault("store")
        except StoreError as error:
            # The estimate is still right; only its record is missing. Answer, flag the fault.
            self.set_fault("store", str(error))
            logger.error("prediction %s not recorded: %s", prediction_id, error)
            prediction_id = ""
        return estimate_message(answer, prediction_id)

    # ------------------------------------------------------------------ RPCs
    def Predict(self, request, context):
        def body():
            spec = job_spec_from_request(request, self.limits)
            return self._answer(spec, "submit", False, request)
        return self._run("Predict", context, body)

    def PredictAtAllocation(self, request, context):
        def body():
            if not request.node_list:
                raise InvalidRequest("node_list", "required at allocation")
            job_request = request.request
            if not job_request.job.user and request.prediction_id:
                # The prolog may send only ids: the submission's own request says who and what.
                job_request, _ = self._stored_request(request.prediction_id)
            spec = job_spec_from_request(job_request, self.limits, node_list=request.node_list,
                                         job_id=request.job_id, tasks_per_node=request.tasks_per_node)
            return self._answer(spec, "allocation", True, job_request)
        return self._run("PredictAtAllocation", context, body)

    def _stored_request(self, prediction_id: str):
        """The JobRequest a stored prediction was made for, and its row."""
        row = self.store.prediction(prediction_id)
        if row is None or not row.request:
            raise InvalidRequest("prediction_id", f"unknown prediction {prediction_id!r}")
        return pb.JobRequest.FromString(row.request), row

    def ReportOutcome(self, request, context):
        def body():
            record, prediction_id = self._outcome_record(request)
            stored = self.store.record_outcome(record, prediction_id=prediction_id, node_list=request.node_list)
            if "store" in self.engine.faults:
                self.clear_fault("store")
            if stored:
                self.engine.observe(record)
                self.metrics.outcomes.labels(record.state).inc()
            return pb.OutcomeAck(stored=True, job_id=record.job_id, duplicate=not stored)
        return self._run("ReportOutcome", context, body)

    def _outcome_record(self, outcome) -> tuple[JobRecord, str]:
        if not outcome.job_id:
            raise InvalidRequest("job_id", "required")
        if len(outcome.job_id) > 128:
            raise InvalidRequest("job_id", "longer than 128 characters")
        state = outcome.state.upper().split()[0] if outcome.state.strip() else ""
        if state not in STATES:
            raise InvalidRequest("state", f"unknown final state {outcome.state!r}")
        elapsed = outcome.elapsed_s or (outcome.end_time - outcome.start_time if outcome.end_time and outcome.start_time else -1)
        if not 0 <= elapsed <= self.limits.max_time_s:
            raise InvalidRequest("elapsed_s", f"{elapsed} is not a runtime in seconds")
        prediction_id = outcome.prediction_id
        if not prediction_id:
            # The hooks' AdminComment field was rewritten by a site tool: the prediction
            # recorded at allocation under this job id (after its submission) links the outcome.
            row = self.store.prediction_for_job(outcome.job_id, since=float(outcome.submit_time or 0))
            prediction_id = row.prediction_id if row is not None else ""
        request = outcome.request
        if not request.job.user and prediction_id:
            try:
                request, _ = self._stored_request(prediction_id)
            except InvalidRequest:
                pass  # unknown prediction: the outcome's own (empty) request is then refused below
        spec = job_spec_from_request(request, self.limits, job_id=outcome.job_id)
        record = JobRecord(
            job_id=outcome.job_id, user=spec.user, submit_time=float(outcome.submit_time or spec.submit_time),
            runtime_s=float(elapsed), requested_time_s=float(0 if spec.time_limit_is_default else spec.time_limit_s),
            application=spec.application, job_name=spec.job_name, group=spec.group, account=spec.account,
            partition=spec.partition, qos=spec.qos, nodes=spec.nodes,
            requested_procs=spec.ntasks * spec.cpus_per_task, start_time=float(outcome.start_time or -1),
            end_time=float(outcome.end_time or time.time()), state=state, exit_code=int(outcome.exit_code),
            inputs=spec.inputs)
        return record, prediction_id

    def ReportRuntimeFeatures(self, request, context):
        def body():
            if not request.prediction_id:
                raise InvalidRequest("prediction_id", "required")
            job, row = self._stored_request(request.prediction_id)
            if len(request.features) > self.limits.max_inputs:
                raise InvalidRequest("features", f"more than {self.limits.max_inputs}")
            for feature in request.features:
                if not feature.key:
                    raise InvalidRequest("features.key", "required")
                job.inputs[feature.key].CopyFrom(feature.value)
            spec = job_spec_from_request(job, self.limits, job_id=request.job_id or row.job_id)
            return self._answer(spec, "runtime-features", False, job)
        return self._run("ReportRuntimeFeatures", context, body)

    # ------------------------------------------------------------------ admin
    def _require_admin(self, context, method: str) -> None:
        if not self._is_admin(context):
            self.metrics.requests.labels(method, "PERMISSION_DENIED").inc()
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"{method} is an admin RPC: call it as root or a configured admin user "
                          f"over the admin socket")

    def _model_infos(self):
        infos = []
        for artifact in self.engine.describe():
            infos.append(pb.ModelInfo(kind=artifact.kind, key=artifact.key, version=artifact.version,
                                      created=artifact.created, path=str(artifact.path), serving=True,
                                      metadata={k: str(v) for k, v in artifact.metadata.items()}))
        return infos

    def ReloadModels(self, request, context):
        self._require_admin(context, "ReloadModels")

        def body():
            models = self.engine.reload()
            self.metrics.set_models(models.artifacts)
            self.metrics.set_faults(self.engine.faults)
            return pb.ReloadReply(models=self._model_infos(), errors=list(models.errors))
        return self._run("ReloadModels", context, body)

    def ListModels(self, request, context):
        self._require_admin(context, "ListModels")
        return self._run("ListModels", context, lambda: pb.ModelList(models=self._model_infos()))

    def GetStatus(self, request, context):
        self._require_admin(context, "GetStatus")

        def body():
            from hpcpredict.daemon import __version__
            try:
                counts = self.store.counts()
                accuracy = self.store.recent_accuracy()
            except StoreError as error:
                self.set_fault("store", str(error))
                counts, accuracy = {"jobs": 0, "outcomes": 0, "predictions": 0}, {}
            faults = dict(self.engine.faults)
            self.metrics.set_faults(faults)
            return pb.Status(version=__version__, uptime_s=time.time() - self.started, models=self._model_infos(),
                             jobs=counts["jobs"], outcomes=counts["outcomes"], predictions=counts["predictions"],
                             faults=[f"{k}: {v}" for k, v in sorted(faults.items())], recent_accuracy=accuracy,
                             store=getattr(self.store, "path", ""), requests=self._counters["requests"],
                             fallbacks=self._counters["fallbacks"])
        return self._run("GetStatus", context, body)
