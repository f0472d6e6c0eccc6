"""The hook socket: newline-delimited JSON in front of the daemon's :class:`PredictionService`.

Slurm's hooks cannot afford a gRPC client: ``job_submit.lua`` runs inside slurmctld (Lua 5.1,
``lua-socket``), and a Python process that imports grpc costs ~90 ms before it sends anything.
So the daemon also listens on a plain Unix socket where one request is one line::

    {"method": "Predict", "request": {<JobRequest in proto3 JSON>}}\\n
    -> {"ok": true, "response": {<Estimate in proto3 JSON, snake_case names>}}\\n
    -> {"ok": false, "error": "job.user: required", "code": "INVALID_ARGUMENT"}\\n

The line is parsed into the same protobuf message the gRPC server receives and handed to the
*same* service, so validation, models and store writes are identical on both paths; the
service's errors become ``ok: false`` replies with the status name gRPC would answer. The
caller is the uid the kernel reports for the connection (SO_PEERCRED). Only the methods in
:data:`HOOK_METHODS` are reachable here; admin calls stay on gRPC.

Bounded on every side: a line longer than ``max_line_bytes`` is refused, a client that sends
nothing within ``read_timeout`` is dropped, and when all ``workers`` are busy a new client gets
``{"ok": false, "error": "busy"}`` at once instead of queueing (the hooks fail open on it).

Example (``service`` is the daemon's ``PredictionService``)::

    server = HookServer("/run/hpcpredict/hook.sock", service)
    server.start()
    ...
    server.stop(grace=2.0)
"""
from __future__ import annotations

import json
import logging
import os
import socket
import struct
import threading
import time

from google.protobuf import json_format

from .service import error_message, status_name
from ..proto.v1 import hpcpredict_pb2 as pb

logger = logging.getLogger(__name__)

#: Methods the hooks may call, and their request messages; everything else is gRPC-only.
HOOK_METHODS = {"Predict": pb.JobRequest, "PredictAtAllocation": pb.AllocationRequest,
                "ReportOutcome": pb.Outcome}


class HookServer:
    """Serve :data:`HOOK_METHODS` of ``service`` as JSON lines on the Unix socket ``path``."""

    def __init__(self, path: str, service, *, max_line_bytes: int = 4 << 20, workers: int = 8,
                 read_timeout: float = 5.0, mode: int = 0o660):
        self.path = path
        self.service = service
        self.max_line_bytes = max_line_bytes
        self.workers = workers
        self.read_timeout = read_timeout
        self.mode = mode
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._slots = threading.BoundedSemaphore(workers)
        self._active: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "HookServer":
        """Bind the socket (replacing a stale one) and start accepting in a daemon thread."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(self.path):
            if _socket_answers(self.path):
                raise OSError(f"hook socket {self.path} is in use by another process")
            os.unlink(self.path)  # stale file of a process that died
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.path)
        os.chmod(self.path, self.mode)
        listener.listen(128)
        self._listener = listener
        self._stopping.clear()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="hook-accept", daemon=True)
        self._accept_thread.start()
        logger.info("hook socket listening on %s (%d workers)", self.path, self.workers)
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting, wait up to ``grace`` seconds for calls in flight, remove the socket."""
        self._stopping.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout=2.0)
        deadline = time.monotonic() + (grace or 0.0)
        with self._lock:
            active = list(self._active)
        for thread in active:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        try:
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                os.unlink(self.path)
        except OSError as error:
            logger.warning("could not remove hook socket %s: %s", self.path, error)
        logger.info("hook socket %s stopped", self.path)

    # ------------------------------------------------------------------ connections
    def _accept_loop(self) -> None:
        listener = self._listener
        while not self._stopping.is_set() and listener is not None:
            try:
                conn, _ = listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                logger.exception("hook socket accept failed")
                time.sleep(0.05)
                continue
            if not self._slots.acquire(blocking=False):
                # Every worker is busy: answer at once, the hook then fails open.
                self.service.metrics.rejected.inc()
                _send(conn, {"ok": False, "error": "busy"})
                conn.close()
                continue
            thread = threading.Thread(target=self._serve_connection, args=(conn,), name="hook-conn", daemon=True)
            with self._lock:
                self._active.add(thread)
            thread.start()

    def _serve_connection(self, conn: socket.socket) -> None:
        try:
            uid = _peer_uid(conn)
            conn.settimeout(self.read_timeout)
            reader = conn.makefile("rb")
            while not self._stopping.is_set():
                try:
                    line = reader.readline(self.max_line_bytes + 1)
                except (socket.timeout, OSError):
                    return
                if not line:
                    return
                if len(line) > self.max_line_bytes and not line.endswith(b"\n"):
                    _send(conn, {"ok": False, "error": f"request line longer than {self.max_line_bytes} bytes"})
                    return
                reply = self.handle_line(line, uid)
                if not _send(conn, reply):
                    return
        except Exception:  # a bug here must never kill the daemon; log it and drop the client
            logger.exception("hook connection failed")
        finally:
            try:
                conn.close()
            finally:
                with self._lock:
                    self._active.discard(threading.current_thread())
                self._slots.release()

    def handle_line(self, line: bytes, caller_uid: int | None = None) -> dict:
        """One request line -> the reply object (never raises for bad input)."""
        try:
            envelope = json.loads(line)
        except (UnicodeDecodeError, ValueError) as error:
            return {"ok": False, "error": f"request is not JSON: {error}"}
        if not isinstance(envelope, dict):
            return {"ok": False, "error": "request must be a JSON object"}
        method = envelope.get("method")
        if method not in HOOK_METHODS:
            return {"ok": False, "error": f"method: must be one of {', '.join(HOOK_METHODS)}, got {method!r}"}
        body = envelope.get("request", {})
        if not isinstance(body, dict):
            return {"ok": False, "error": "request: must be a JSON object"}
        try:
            request = json_format.ParseDict(body, HOOK_METHODS[method]())
        except json_format.ParseError as error:
            return {"ok": False, "error": f"request: {error}"}
        try:
            response = self.service.call(method, request, caller_uid)
        except Exception as error:   # the service's errors, and a bug (logged there): keep serving
            code = status_name(error)
            logger.info("hook %s refused (%s): %s", method, code, error)
            return {"ok": False, "error": error_message(method, error), "code": code}
        return {"ok": True, "response": json_format.MessageToDict(
            response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)}


def _send(conn: socket.socket, reply: dict) -> bool:
    try:
        conn.sendall(json.dumps(reply, separators=(",", ":"), ensure_ascii=True).encode() + b"\n")
        return True
    except OSError:
        return False


def _peer_uid(conn: socket.socket) -> int | None:
    """The uid of the connected process, from the kernel (Linux SO_PEERCRED)."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", raw)[1]
    except OSError:
        return None


def _socket_answers(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()
