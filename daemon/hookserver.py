"""The local socket: every RPC as newline-delimited JSON, the caller named by the kernel.

Slurm's hooks cannot afford a gRPC client: ``job_submit.lua`` runs inside slurmctld (Lua 5.1,
``lua-socket``), and a Python process that imports grpc costs ~90 ms before it sends anything.
The CLI, the prolog/epilog scripts and the hook all talk to this Unix socket, one request per
line::

    {"method": "Predict", "request": {<JobRequest in proto3 JSON>}}\\n
    -> {"ok": true, "response": {<Estimate in proto3 JSON, snake_case names>}}\\n
    -> {"ok": false, "error": "job.user: required", "code": "INVALID_ARGUMENT"}\\n

The line is parsed into the same protobuf message the gRPC server receives and handed to the
*same* service with the caller's uid, which the kernel reports for the connection
(SO_PEERCRED): nothing the caller sends can change it. So the socket is open to every local
user (mode 0666) and the service decides per call what that uid may do
(:mod:`.service`); its refusals come back as ``ok: false`` with the status name gRPC would use.

Bounded on every side, so one user cannot starve the hooks of others:

* at most ``max_connections`` open connections, and ``max_connections_per_user`` of one
  unprivileged uid; past either, ``{"ok": false, "error": "busy"}`` and close;
* a whole request line must arrive within ``request_timeout`` of its first byte (a client
  trickling one byte a second is cut off), a connection idle for ``idle_timeout`` is closed,
  and a line longer than ``max_line_bytes`` is refused;
* calls run on a fixed pool of ``workers`` threads; past ``max_pending`` calls running or
  waiting for a worker, ``busy`` at once instead of queueing (the hooks fail open on it);
* one event loop thread multiplexes every connection, so a slow client holds no worker; an
  accept that fails (EMFILE) pauses accepting for a second and goes on (asyncio's own
  back-off), it never stops the listener;
* overload is shed, not queued: while the loop runs more than ``max_lag`` behind (measured by
  a 50 ms heartbeat), a new connection is told ``busy`` at once. A hook gives up after its
  budget (300 ms) anyway; answering it later would only delay the calls behind it. The
  listen backlog stays short (128) for the same reason: a hook that cannot connect fails open
  at once instead of waiting in the kernel.

A ``Predict`` whose record goes to the memory-mapped journal (``inline``) is answered on the
loop's own thread: a hand-off to a worker and back costs more than the call itself, and two
threads taking turns on one interpreter lock wait for each other's switch interval.

Example (``service`` is the daemon's ``PredictionService``)::

    server = HookServer("/run/hpcpredict/hook.sock", service)
    server.start()
    ...
    server.stop(grace=2.0)
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from google.protobuf import json_format

from .service import error_message, status_name
from ..proto.v1 import hpcpredict_pb2 as pb

logger = logging.getLogger(__name__)

_SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
#: Every RPC of the Predictor service and its request message.
METHODS = {method.name: getattr(pb, method.input_type.name) for method in _SERVICE.methods}
BUSY = b'{"ok":false,"error":"busy"}\n'


class HookServer:
    """Serve every RPC of ``service`` as JSON lines on the Unix socket ``path``."""

    def __init__(self, path: str, service, *, max_line_bytes: int = 4 << 20, workers: int = 8,
                 max_pending: int = 64, max_connections: int = 512, max_connections_per_user: int = 32,
                 request_timeout: float = 5.0, idle_timeout: float = 30.0, mode: int = 0o666,
                 inline: frozenset[str] = frozenset(), max_lag: float = 0.25):
        self.path = path
        self.service = service
        self.max_line_bytes = max_line_bytes
        self.workers = workers
        self.max_pending = max_pending
        self.max_connections = max_connections
        self.max_connections_per_user = max_connections_per_user
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.mode = mode
        self.inline = inline
        self.max_lag = max_lag
        self._lag = 0.0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="local-call")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self._per_uid: dict[int | None, int] = {}
        self._pending = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "HookServer":
        """Bind the socket (replacing a stale one) and serve from a daemon thread."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(self.path):
            if _socket_answers(self.path):
                raise OSError(f"local socket {self.path} is in use by another process")
            os.unlink(self.path)  # stale file of a process that died
        loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(asyncio.start_unix_server(
                self._serve, path=self.path, limit=self.max_line_bytes, backlog=128))
            os.chmod(self.path, self.mode)
        except BaseException:
            loop.close()
            raise
        self._loop = loop
        self._heartbeat = loop.create_task(self._measure_lag())
        self._thread = threading.Thread(target=self._run, name="local-socket", daemon=True)
        self._thread.start()
        logger.info("local socket listening on %s (mode %#o, %d workers)", self.path, self.mode, self.workers)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting, wait up to ``grace`` seconds for calls in flight, remove the socket."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        grace = grace or 0.0
        try:
            asyncio.run_coroutine_threadsafe(self._drain(grace), loop).result(timeout=grace + 5.0)
        except Exception:
            logger.exception("local socket did not drain")
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            loop.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        try:
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                os.unlink(self.path)
        except OSError as error:
            logger.warning("could not remove local socket %s: %s", self.path, error)
        logger.info("local socket %s stopped", self.path)

    async def _measure_lag(self, period: float = 0.05) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + period
            await asyncio.sleep(period)
            self._lag = loop.time() - due

    async def _drain(self, grace: float) -> None:
        self._heartbeat.cancel()
        self._server.close()
        deadline = time.monotonic() + grace
        while self._pending and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for writer in list(self._connections):
            writer.transport.abort()

    # ------------------------------------------------------------------ connections
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        uid = _peer_uid(writer.get_extra_info("socket"))
        capped = not self.service.privileged(uid)   # the hooks' own users are bounded by the total only
        if len(self._connections) >= self.max_connections or self._lag > self.max_lag or (
                capped and self._per_uid.get(uid, 0) >= self.max_connections_per_user):
            self.service.metrics.rejected.inc()
            writer.write(BUSY)
            writer.close()
            return
        self._connections.add(writer)
        self._per_uid[uid] = self._per_uid.get(uid, 0) + 1
        try:
            await self._requests(reader, writer, uid)
        except (ConnectionError, OSError, TimeoutError):
            pass   # the client went away, or does not read its replies
        except Exception:  # a bug here must never stop the listener; log it and drop the client
            logger.exception("local socket connection failed")
        finally:
            self._connections.discard(writer)
            left = self._per_uid.pop(uid) - 1
            if left:
                self._per_uid[uid] = left
            writer.close()

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, uid) -> None:
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout):
                    first = await reader.read(1)
            except TimeoutError:
                return
            if not first:
                return
            try:
                # the whole line within request_timeout of its first byte, however it trickles in
                async with asyncio.timeout(self.request_timeout):
                    line = first if first == b"\n" else first + await reader.readuntil(b"\n")
            except TimeoutError:
                writer.write(_encode({"ok": False, "error": f"request line not complete within "
                                                            f"{self.request_timeout:g} s"}))
                return
            except asyncio.LimitOverrunError:
                writer.write(_encode({"ok": False, "error": f"request line longer than {self.max_line_bytes} bytes"}))
                return
            except asyncio.IncompleteReadError:
                return
            if self._pending >= self.max_pending:
                self.service.metrics.rejected.inc()
                writer.write(BUSY)
                return
            self._pending += 1
            try:
                if self.inline and _method_of(line) in self.inline:
                    reply = self._answer(line, uid)   # no thread hand-off (module docstring)
                else:
                    reply = await self._loop.run_in_executor(self._pool, self._answer, line, uid)
            finally:
                self._pending -= 1
            writer.write(reply)
            async with asyncio.timeout(self.request_timeout):   # a client that does not read
                await writer.drain()

    def _answer(self, line: bytes, uid) -> bytes:
        return _encode(self.handle_line(line, uid))

    def handle_line(self, line: bytes, caller_uid: int | None) -> dict:
        """One request line from ``caller_uid`` -> the reply object (never raises for bad input)."""
        try:
            envelope = json.loads(line)
        except RecursionError:
            return {"ok": False, "error": "request is not JSON we accept: nested too deeply"}
        except (UnicodeDecodeError, ValueError) as error:
            return {"ok": False, "error": f"request is not JSON: {error}"}
        if not isinstance(envelope, dict):
            return {"ok": False, "error": "request must be a JSON object"}
        method = envelope.get("method")
        if method not in METHODS:
            return {"ok": False, "error": f"method: must be one of {', '.join(METHODS)}, got {method!r}"}
        body = envelope.get("request", {})
        if not isinstance(body, dict):
            return {"ok": False, "error": "request: must be a JSON object"}
        try:
            request = json_format.ParseDict(body, METHODS[method]())
        except json_format.ParseError as error:
            return {"ok": False, "error": f"request: {error}", "code": "INVALID_ARGUMENT"}
        except RecursionError:
            return {"ok": False, "error": "request: nested too deeply", "code": "INVALID_ARGUMENT"}
        try:
            response = self.service.call(method, request, caller_uid)
        except Exception as error:   # the service's errors, and a bug (logged there): keep serving
            code = status_name(error)
            logger.info("local %s refused (%s): %s", method, code, error)
            return {"ok": False, "error": error_message(method, error), "code": code}
        return {"ok": True, "response": json_format.MessageToDict(
            response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)}


def _method_of(line: bytes) -> str:
    """The method a request line names, cheaply: the hooks and the CLI put it first."""
    head = line[:40]
    for method in METHODS:
        if head.startswith(b'{"method":"' + method.encode() + b'"') or head.startswith(b'{"method": "' + method.encode() + b'"'):
            return method
    return ""


def _encode(reply: dict) -> bytes:
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def _peer_uid(sock) -> int | None:
    """The uid of the connected process, from the kernel (Linux SO_PEERCRED)."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", raw)[1]
    except (OSError, AttributeError):
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
