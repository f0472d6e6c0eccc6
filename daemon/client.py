"""The CLI's side of the wire: a channel to the daemon with a deadline on every call."""
from __future__ import annotations

import os

import grpc

from .errors import DaemonUnavailable, HpcPredictError
from ..proto.v1 import hpcpredict_pb2 as pb
from ..proto.v1 import hpcpredict_pb2_grpc as pb_grpc


def resolve_socket(cli_socket: str | None, config) -> str:
    return cli_socket or os.environ.get("HPCPREDICT_SOCKET") or config.daemon.socket


class DaemonClient:
    def __init__(self, socket_path: str, *, timeout: float = 10.0):
        self.socket_path = socket_path
        self.timeout = timeout
        self.channel = grpc.insecure_channel(f"unix:{socket_path}")
        self.stub = pb_grpc.PredictorStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, method: str, request):
        try:
            return getattr(self.stub, method)(request, timeout=self.timeout)
        except grpc.RpcError as error:
            code = error.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and not os.path.exists(self.socket_path):
                raise DaemonUnavailable(f"no daemon at {self.socket_path} (start it with `hpcpredictd` "
                                        f"or pass --socket)") from error
            raise HpcPredictError(f"{method}: {code.name}: {error.details()}") from error

    def predict(self, request: pb.JobRequest) -> pb.Estimate:
        return self.call("Predict", request)


def admin_client(socket_path: str, *, timeout: float = 60.0) -> DaemonClient:
    """A client on the admin socket (SO_PEERCRED-checked) next to the daemon's socket."""
    from .server import admin_socket_path

    return DaemonClient(admin_socket_path(socket_path), timeout=timeout)
