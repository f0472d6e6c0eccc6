"""The gRPC adapter: grpcio's thread-pool server in front of the :class:`PredictionService`.

Each Predictor method decodes its request, asks the service, and maps the service's errors to
status codes (:func:`~hpcpredict.daemon.service.status_name`). A request that does not decode
is answered ``INVALID_ARGUMENT`` naming the field where it can (invalid UTF-8), not with the
transport's generic error. Past ``max_concurrent`` calls (running plus queued for a worker),
gRPC itself answers ``RESOURCE_EXHAUSTED`` at once, so a burst never queues behind slow calls.
Health is grpcio's own ``HealthServicer`` (``Check`` and ``Watch``); reflection is on.

gRPC Python does not tell a servicer who is on the other end of a Unix socket, so the daemon
serves gRPC to trusted tools only (the socket's mode admits no one else) and says who they
act as with ``caller_uid``; everyone else uses the local socket (:mod:`.local_socket`).
"""
from __future__ import annotations

import logging
from concurrent import futures
from typing import TYPE_CHECKING, Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ..jobspec import invalid_utf8_fields
from ..service import error_message, status_name
from ...proto.v1 import hpcpredict_pb2 as pb

if TYPE_CHECKING:
    from ..service import PredictionService

logger = logging.getLogger(__name__)

SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
SERVICE_NAMES = (SERVICE.full_name, health.SERVICE_NAME, reflection.SERVICE_NAME)
MAX_MESSAGE_BYTES = 64 << 20  # above every [limits] so our validator, not the transport, says what is wrong


class _BadRequest:
    """Stands in for a request that did not decode, so the handler can say which field was bad."""

    def __init__(self, message: str):
        self.message = message


def _lenient(message_class):
    def deserialize(data: bytes):
        try:
            return message_class.FromString(data)
        except Exception:
            fields = invalid_utf8_fields(data, message_class.DESCRIPTOR)
            if fields:
                return _BadRequest(f"{', '.join(fields)}: not valid UTF-8 text")
            return _BadRequest(f"request is not a valid {message_class.DESCRIPTOR.full_name}: malformed protobuf")
    return deserialize


def _handler(service: PredictionService, method: str, caller_uid: Callable[[object], int | None]):
    def handle(request, context):
        if isinstance(request, _BadRequest):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        try:
            return service.call(method, request, caller_uid(context))
        except Exception as error:
            context.abort(grpc.StatusCode[status_name(error)], error_message(method, error))
    return handle


def grpc_server(service: PredictionService, *, workers: int, max_concurrent: int,
                caller_uid: Callable[[object], int | None]) -> tuple[grpc.Server, health.HealthServicer]:
    """The server (ports not yet added, not started) and its health service (every name SERVING
    once :func:`set_serving` says so). ``caller_uid(context)`` says who the call acts as."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc"),
        maximum_concurrent_rpcs=max_concurrent,
        options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.so_reuseport", 0),
                 ("grpc.max_connection_idle_ms", 60_000)])   # idle tool connections do not pile up
    handlers = {}
    for method in SERVICE.methods:
        handlers[method.name] = grpc.unary_unary_rpc_method_handler(
            _handler(service, method.name, caller_uid),
            request_deserializer=_lenient(getattr(pb, method.input_type.name)),
            response_serializer=getattr(pb, method.output_type.name).SerializeToString)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),))
    health_servicer = health.HealthServicer()
    set_serving(health_servicer, False)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(SERVICE_NAMES, server)
    return server, health_servicer


def set_serving(health_servicer: health.HealthServicer, serving: bool) -> None:
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for name in ("", SERVICE.full_name):
        health_servicer.set(name, status)
