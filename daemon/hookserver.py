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
* one loop thread multiplexes every connection, so a slow client holds no worker; an accept
  that fails for want of descriptors (EMFILE) pauses accepting for a second and goes on, it
  never stops the listener;
* overload is shed, not queued: while the loop comes back for its 50 ms tick more than
  ``max_lag`` late, a request is answered ``busy`` at once. A hook gives up after its
  budget (300 ms) anyway; answering it later would only delay the calls behind it. The
  listen backlog stays short (128) for the same reason: a hook that cannot connect fails open
  at once instead of waiting in the kernel.

One thread runs a ``selectors`` loop over the listener and every connection: a connection
costs a registration, one read and one write (asyncio's streams cost about twice the CPU per
connection, measured in ``benchmarks/README.md#hook``). A ``Predict`` whose record goes to the
memory-mapped journal (``inline``) is answered on that thread, usually in the same round that
accepted its connection: a hand-off to a worker and back costs more than the call itself, and
two threads taking turns on one interpreter lock wait for each other's switch interval. Other
calls (they may wait for the disk) go to the worker pool and their replies come back through
a wake-up socket.

Example (``service`` is the daemon's ``PredictionService``)::

    server = HookServer("/run/hpcpredict/hook.sock", service)
    server.start()
    ...
    server.stop(grace=2.0)
"""
from __future__ import annotations

import collections
import errno
import json
import logging
import os
import selectors
import socket
import struct
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from google.protobuf import json_format

from .service import error_message, status_name
from ..proto.v1 import hpcpredict_pb2 as pb

logger = logging.getLogger(__name__)

_SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
#: Every RPC of the Predictor service and its request message.
METHODS = {method.name: getattr(pb, method.input_type.name) for method in _SERVICE.methods}
BUSY = b'{"ok":false,"error":"busy"}\n'
_TICK = 0.05            # seconds between deadline sweeps
_ACCEPTS_PER_ROUND = 32  # then serve the connections already open, so none starves
_READ_BYTES = 65536
# accept() failures that mean "no descriptors or memory now", not "the listener is broken"
_ACCEPT_PAUSE_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class _Connection:
    """One client: bytes received and not yet a whole line, the reply not yet sent, and the
    moment it is cut off (idle, line incomplete, reply unread)."""

    __slots__ = ("sock", "uid", "received", "unsent", "deadline", "events", "calling",
                 "close_when_sent", "closed")

    def __init__(self, sock: socket.socket, uid: int | None, deadline: float):
        self.sock = sock
        self.uid = uid
        self.received = bytearray()
        self.unsent = bytearray()
        self.deadline = deadline
        self.events = 0             # what the selector waits for on it (0: not registered)
        self.calling = False        # a worker is answering its request
        self.close_when_sent = False
        self.closed = False



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
        self._selector: selectors.BaseSelector | None = None
        self._listener: socket.socket | None = None
        self._wake_reader: socket.socket | None = None
        self._wake_writer: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[int, _Connection] = {}
        self._per_uid: dict[int | None, int] = {}
        self._pending = 0
        self._replies: collections.deque = collections.deque()   # (connection, future) from workers
        self._accept_paused_until = 0.0
        self._stop_at: float | None = None     # set by stop(): answer what is in flight until then

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "HookServer":
        """Bind the socket (replacing a stale one) and serve from a daemon thread."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(self.path):
            if _socket_answers(self.path):
                raise OSError(f"local socket {self.path} is in use by another process")
            os.unlink(self.path)  # stale file of a process that died
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            os.chmod(self.path, self.mode)
            listener.listen(128)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ, "listener")
        self._selector.register(self._wake_reader, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name="local-socket", daemon=True)
        self._thread.start()
        logger.info("local socket listening on %s (mode %#o, %d workers)", self.path, self.mode, self.workers)
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting, wait up to ``grace`` seconds for calls in flight, remove the socket."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop_at = time.monotonic() + (grace or 0.0)
        self._wake()
        thread.join(timeout=(grace or 0.0) + 5.0)
        if thread.is_alive():
            logger.error("local socket did not stop within its grace")
        self._pool.shutdown(wait=False, cancel_futures=True)
        try:
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                os.unlink(self.path)
        except OSError as error:
            logger.warning("could not remove local socket %s: %s", self.path, error)
        logger.info("local socket %s stopped", self.path)

    def _wake(self) -> None:
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass    # already awake (the pair's buffer is full), or closed at stop

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        tick = time.monotonic() + _TICK
        try:
            while True:
                events = self._selector.select(max(0.0, tick - time.monotonic()))
                began = time.monotonic()
                for key, mask in events:
                    if key.data == "listener":
                        self._accept(began)
                    elif key.data == "wake":
                        self._drain_wakes()
                    elif key.data.closed:
                        continue    # closed earlier in this round
                    elif mask & selectors.EVENT_WRITE:
                        if self._flush(key.data):
                            self._serve_lines(key.data)
                    else:
                        self._read(key.data)
                self._deliver_replies()
                now = time.monotonic()
                if now >= tick:
                    # how late the loop came back for its tick: what a request arriving now waits
                    self._lag = now - tick
                    tick = now + _TICK
                    self._sweep(now)
                if self._stop_at is not None and self._stopping(now):
                    return
        except Exception:   # a bug here must not pass silently: the hooks fail open meanwhile
            logger.exception("local socket loop failed")
        finally:
            self._close_all()

    def _stopping(self, now: float) -> bool:
        """Past stop(): no more accepts; True once the calls in flight are answered or grace ran out."""
        if self._listener is not None:
            self._unlisten()
        return self._pending == 0 or now >= self._stop_at

    def _unlisten(self) -> None:
        if not self._accept_paused_until:
            self._selector.unregister(self._listener)
        self._listener.close()
        self._listener = None

    def _close_all(self) -> None:
        for connection in list(self._connections.values()):
            self._close(connection)
        if self._listener is not None:
            self._unlisten()
        for sock in (self._wake_reader, self._wake_writer):
            sock.close()
        self._selector.close()

    def _drain_wakes(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _sweep(self, now: float) -> None:
        """Cut off connections past their deadline; resume accepting after a pause."""
        if self._accept_paused_until and now >= self._accept_paused_until and self._listener is not None:
            self._accept_paused_until = 0.0
            self._selector.register(self._listener, selectors.EVENT_READ, "listener")
        for connection in [c for c in self._connections.values() if c.deadline <= now and not c.calling]:
            if connection.received and not connection.unsent:   # a line begun, not finished
                _send_best_effort(connection.sock, _encode(
                    {"ok": False, "error": f"request line not complete within {self.request_timeout:g} s"}))
            self._close(connection)     # else idle, or not reading its reply: closed without a word

    # ------------------------------------------------------------------ connections
    def _accept(self, now: float) -> None:
        for _ in range(_ACCEPTS_PER_ROUND):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:
                if error.errno not in _ACCEPT_PAUSE_ERRNOS:
                    raise
                # out of descriptors: stop accepting for a second (the kernel keeps the backlog)
                logger.warning("local socket cannot accept (%s); pausing accepts for 1 s", error)
                self._selector.unregister(self._listener)
                self._accept_paused_until = now + 1.0
                return
            sock.setblocking(False)
            uid = _peer_uid(sock)
            capped = not self.service.privileged(uid)   # the hooks' own users are bounded by the total only
            if len(self._connections) >= self.max_connections or (
                    capped and self._per_uid.get(uid, 0) >= self.max_connections_per_user):
                self.service.metrics.rejected.inc()
                _refuse(sock)
                continue
            connection = _Connection(sock, uid, now + self.idle_timeout)
            self._connections[sock.fileno()] = connection
            self._per_uid[uid] = self._per_uid.get(uid, 0) + 1
            self._watch(connection, selectors.EVENT_READ)
            self._read(connection)   # the hooks send their line right after connecting

    def _watch(self, connection: _Connection, events: int) -> None:
        """Wait for ``events`` on the connection (0: for nothing, while a worker answers it)."""
        if events == connection.events:
            return
        if not events:
            self._selector.unregister(connection.sock)
        elif not connection.events:
            self._selector.register(connection.sock, events, connection)
        else:
            self._selector.modify(connection.sock, events, connection)
        connection.events = events

    def _read(self, connection: _Connection) -> None:
        try:
            data = connection.sock.recv(_READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(connection)
            return
        if not connection.received:
            connection.deadline = time.monotonic() + self.request_timeout   # from a line's first byte
        connection.received += data
        self._serve_lines(connection)

    def _serve_lines(self, connection: _Connection) -> None:
        """Answer the whole lines received, one at a time and in order, then wait for more."""
        received = connection.received
        while not connection.closed:
            end = received.find(b"\n")
            if end < 0 and len(received) <= self.max_line_bytes:
                if not received:
                    connection.deadline = time.monotonic() + self.idle_timeout
                self._watch(connection, selectors.EVENT_READ)
                return      # the rest of the line is still on its way
            if end < 0 or end >= self.max_line_bytes:
                self._reply(connection, _encode(
                    {"ok": False, "error": f"request line longer than {self.max_line_bytes} bytes"}), close=True)
                return
            line = bytes(received[:end + 1])
            del received[:end + 1]
            if received:
                connection.deadline = time.monotonic() + self.request_timeout
            if self._pending >= self.max_pending or self._lag > self.max_lag:
                self.service.metrics.rejected.inc()
                self._reply(connection, BUSY, close=True)
                return
            if not (self.inline and _method_of(line) in self.inline):
                self._pending += 1
                connection.calling = True
                self._watch(connection, 0)      # nothing more from it until this reply is out
                future = self._pool.submit(self._answer, line, connection.uid)
                future.add_done_callback(lambda done, c=connection: self._replied(c, done))
                return
            self._pending += 1
            try:
                reply = self._answer(line, connection.uid)   # no thread hand-off (module docstring)
            finally:
                self._pending -= 1
            if not self._reply(connection, reply):
                return      # the client does not read yet: go on once the reply is out

    def _replied(self, connection: _Connection, future: Future) -> None:
        """A worker finished (any thread): hand the reply to the loop."""
        self._replies.append((connection, future))
        self._wake()

    def _deliver_replies(self) -> None:
        while self._replies:
            connection, future = self._replies.popleft()
            self._pending -= 1
            connection.calling = False
            if connection.closed:
                continue
            try:
                reply = future.result()
            except Exception:   # cancelled at shutdown, or a bug: this client gets no answer
                logger.exception("local call failed")
                self._close(connection)
                continue
            if self._reply(connection, reply):
                self._serve_lines(connection)

    def _reply(self, connection: _Connection, data: bytes, close: bool = False) -> bool:
        """Send ``data`` (then close, if asked); True when all of it went out at once."""
        connection.unsent += data
        connection.close_when_sent = connection.close_when_sent or close
        return self._flush(connection)

    def _flush(self, connection: _Connection) -> bool:
        try:
            sent = connection.sock.send(connection.unsent)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:     # the client went away
            self._close(connection)
            return False
        del connection.unsent[:sent]
        if connection.unsent:
            # the client does not read: wait for room, read nothing more, cut it off at the deadline
            connection.deadline = time.monotonic() + self.request_timeout
            self._watch(connection, selectors.EVENT_WRITE)
            return False
        if connection.close_when_sent:
            self._close(connection)
            return False
        return True

    def _close(self, connection: _Connection) -> None:
        if connection.closed:
            return
        connection.closed = True
        self._connections.pop(connection.sock.fileno(), None)
        self._watch(connection, 0)
        left = self._per_uid.pop(connection.uid, 1) - 1
        if left:
            self._per_uid[connection.uid] = left
        connection.sock.close()

    # ------------------------------------------------------------------ calls
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


def _refuse(sock: socket.socket) -> None:
    """Tell a client it came at a busy moment, and close. Its request line is read first (as
    far as it has arrived): closing a Unix socket with unread data makes the client's read fail
    with ECONNRESET instead of returning the answer."""
    try:
        sock.recv(_READ_BYTES)
    except OSError:
        pass
    _send_best_effort(sock, BUSY)
    sock.close()


def _send_best_effort(sock: socket.socket, data: bytes) -> None:
    try:
        sock.send(data)
    except OSError:
        pass    # a client that went away or does not read gets no explanation


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
