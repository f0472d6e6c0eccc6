"""The local socket: every RPC as newline-delimited JSON, the caller named by the kernel.

Slurm's hooks cannot afford a gRPC client: ``job_submit.lua`` runs inside slurmctld (Lua 5.1,
``lua-socket``), and a Python process that imports grpc costs ~90 ms before it sends anything.
The CLI, the prolog/epilog scripts and the hook all talk to this Unix socket, one request per
line::

    {"method": "Predict", "request": {<JobRequest in proto3 JSON>}}\\n
    -> {"ok": true, "response": {<Estimate in proto3 JSON, snake_case names>}}\\n
    -> {"ok": false, "error": "job.user: required", "code": "INVALID_ARGUMENT"}\\n

The line (:mod:`.line_json`, the remote listener's body too) is parsed into the same protobuf
message the gRPC server receives and handed to the *same* service with the caller's uid, which the kernel reports for the connection
(SO_PEERCRED): nothing the caller sends can change it. So the socket is open to every local
user (mode 0666) and the service decides per call what that uid may do
(:mod:`..service`); its refusals come back as ``ok: false`` with the status name gRPC would use.

Bounded on every side, so no user can starve the hooks or another user:

* at most ``max_connections`` open connections, of which ``reserved_connections`` only for the
  privileged callers (root, the Slurm user, admins: the uids :meth:`PredictionService.privileged`
  names), and ``max_connections_per_user`` of one unprivileged uid; past these,
  ``{"ok": false, "error": "busy"}`` and close. Ordinary users filling every slot of theirs
  leave the hooks their own;
* a request line of an unprivileged caller is at most ``user_line_bytes`` (refused as soon as
  that many bytes arrive without a newline; the Slurm hook's own line, a 64 KiB script start,
  is privileged and may be up to ``max_line_bytes``); before any line is turned into a
  message, the item counts of its lists and maps are checked against ``[limits]`` (``argv``,
  ``inputs``, ``environment``, ``comm``; :func:`.line_json.too_many_items`, which the remote
  listener applies too): what a request costs to parse is bounded before it is paid. A method an unprivileged caller may not make is refused without parsing;
* a whole request line must arrive within ``request_timeout`` of its first byte (a client
  trickling one byte a second is cut off), and a connection idle for ``idle_timeout`` is closed;
* fair turns: a connection has at most one request served at a time (the next line of a
  pipeline is not even read before the reply is out). Each turn of the loop serves every
  privileged caller's waiting request, then ONE unprivileged request, the uids taking turns
  round-robin; so the hook's call waits behind at most one ordinary request, and a user's
  pipeline or many connections only make that user wait longer;
* overload is shed, not queued: a request that waited ``max_lag`` for its turn is answered
  ``busy`` (the hooks fail open after their 300 ms budget anyway; answering later would
  only delay the calls behind it). The listen backlog is long and drained every turn
  (``_BACKLOG``): while it is full, the hooks' connects fail at once;
* calls that may wait for the disk (or lines longer than ``user_line_bytes``) go to
  ``workers`` threads started with the server, given work in the same fair order: the loop
  never starts a thread, so a task limit cannot stop it;
* the listener never dies of an exception: one raised while serving a connection closes that
  connection; one raised by the loop itself is logged, counted
  (``hpcpredict_local_socket_errors``) and the loop goes on. Only when the loop fails
  ``_FAILURES_FATAL`` times in a row is it declared dead: ``on_fatal`` is called (the daemon
  then turns its gRPC health NOT_SERVING and exits non-zero, so its service manager restarts it).

One thread runs a ``selectors`` loop over the listener and every connection: a connection
costs a registration, one read and one write (asyncio's streams cost about twice the CPU per
connection, measured in ``benchmarks/README.md#hook``). A ``Predict`` whose record goes to the
memory-mapped journal (``inline``) is answered on that thread, usually in the same turn that
accepted its connection: a hand-off to a worker and back costs more than the call itself, and
two threads taking turns on one interpreter lock wait for each other's switch interval.

Example (``service`` is the daemon's ``PredictionService``)::

    server = LocalSocketServer("/run/hpcpredict/hook.sock", service)
    server.start()
    ...
    server.stop(grace=2.0)
"""
from __future__ import annotations

import collections
import errno
import logging
import os
import queue
import selectors
import socket
import struct
import threading
import time
from typing import TYPE_CHECKING

from . import line_json
from .connections import ACCEPT_PAUSE_ERRNOS, Connection, SelectorServer, listening_socket, refuse, send_best_effort
from .line_json import REQUESTS, Refused, encode
from ..service import ANYONE, RPCS as WHO_MAY_CALL

if TYPE_CHECKING:
    from ..service import PredictionService

logger = logging.getLogger(__name__)

BUSY = encode(line_json.BUSY_REPLY)
_TICK = 0.05            # seconds between deadline sweeps
# The listen backlog, and how many connections are accepted each turn: all of them. A Unix
# connect fails at once (EAGAIN) while the backlog is full, and the kernel cannot tell the hooks'
# connects from the ordinary users' that fill it (users reconnecting as they are told busy): a
# backlog of 128 left the hook 55 % of its calls under 20 users holding their connections. So
# the backlog is long (the kernel caps it at net.core.somaxconn) and drained every turn; a turn
# lasts at most one ordinary request (~20 ms at the limits) plus ~20 us per refused connection.
_BACKLOG = 4096
_ACCEPTS_PER_ROUND = _BACKLOG
# accept() failures that mean the listener itself is gone: the loop cannot go on without it
_ACCEPT_BROKEN_ERRNOS = {errno.EBADF, errno.EINVAL, errno.ENOTSOCK}
_FAILURES_FATAL = 10     # loop turns failing in a row (~2 s with the back-off) before giving up


class _Connection(Connection):
    """A caller (as the kernel names it), the line waiting for its turn, and whether it is
    answered now; ``deadline`` cuts it off when idle, its line incomplete or its reply unread."""

    __slots__ = ("uid", "privileged", "line_limit", "line", "ready_at", "calling", "close_when_sent")

    def __init__(self, sock: socket.socket, uid: int | None, privileged: bool, line_limit: int, deadline: float):
        Connection.__init__(self, sock, deadline)   # (no super() object: one per hook call)
        self.uid = uid
        self.privileged = privileged
        self.line_limit = line_limit
        self.line: bytes | None = None   # a whole request line waiting for its turn
        self.ready_at = 0.0              # ... since then
        self.calling = False        # a worker is answering its request
        self.close_when_sent = False


class LocalSocketServer(SelectorServer):
    """Serve every RPC of ``service`` as JSON lines on the Unix socket ``path``."""

    name = "local socket"
    thread_name = "local-socket"

    def __init__(self, path: str, service: PredictionService, *, max_line_bytes: int = 4 << 20, user_line_bytes: int = 128 << 10,
                 workers: int = 8, max_connections: int = 512, reserved_connections: int = 64,
                 max_connections_per_user: int = 32, request_timeout: float = 5.0, idle_timeout: float = 30.0,
                 mode: int = 0o666, inline: frozenset[str] = frozenset(), max_lag: float = 0.25,
                 on_fatal=None):
        super().__init__()
        self.path = path
        self.service = service
        self.max_line_bytes = max_line_bytes
        self.user_line_bytes = min(user_line_bytes, max_line_bytes)
        self.workers = workers
        self.max_connections = max_connections
        self.reserved_connections = min(reserved_connections, max_connections - 1)
        self.max_connections_per_user = max_connections_per_user
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self.mode = mode
        self.inline = inline
        self.max_lag = max_lag
        self.on_fatal = on_fatal    # called once (with a message) if the loop cannot go on
        self.failed: str | None = None
        self._work: queue.SimpleQueue = queue.SimpleQueue()      # (connection, line) for the workers
        self._worker_threads: list[threading.Thread] = []
        self._running = 0           # calls handed to the workers, not yet delivered
        # used only by the loop start() starts
        self._connections: dict[int, _Connection] = {}   # type: ignore[assignment]
        self._per_uid: dict[int | None, int] = {}
        self._user_connections = 0   # of unprivileged callers
        self._ready_privileged: collections.deque[_Connection] = collections.deque()
        # unprivileged connections with a line waiting, by uid; the uids take turns in this order
        self._ready_users: collections.OrderedDict[int | None, collections.deque[_Connection]] = \
            collections.OrderedDict()
        self._replies: collections.deque = collections.deque()   # (connection, reply) from workers
        self._tick = 0.0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "LocalSocketServer":
        """Bind the socket (replacing a stale one), start the workers and serve from a daemon thread."""
        directory = os.path.dirname(self.path) or "."
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(self.path):
            if _socket_answers(self.path):
                raise OSError(f"local socket {self.path} is in use by another process")
            os.unlink(self.path)  # stale file of a process that died
        listener = listening_socket(socket.AF_UNIX, self.path, _BACKLOG, mode=self.mode)
        # every thread now: one that cannot be started (a task limit) fails the start, not a call
        for index in range(self.workers):
            worker = threading.Thread(target=self._work_loop, name=f"local-call-{index}", daemon=True)
            worker.start()
            self._worker_threads.append(worker)
        self._tick = time.monotonic() + _TICK
        self._serve(listener)
        logger.info("local socket listening on %s (mode %#o, %d workers)", self.path, self.mode, self.workers)
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting, wait up to ``grace`` seconds for calls in flight, remove the socket."""
        if not self._stop_loop(grace):
            return
        for _ in self._worker_threads:
            self._work.put(None)
        try:
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                os.unlink(self.path)
        except OSError as error:
            logger.warning("could not remove local socket %s: %s", self.path, error)
        logger.info("local socket %s stopped", self.path)

    # ------------------------------------------------------------------ the loop
    def _loop_failed(self, error: Exception, failures: int) -> bool:
        """Counted, and the loop goes on, unless it failed _FAILURES_FATAL times in a row."""
        self.service.metrics.local_socket_errors.inc()
        logger.exception("local socket loop: error %d in a row", failures)
        if failures >= _FAILURES_FATAL:
            self._die(f"{failures} loop errors in a row, the last: {type(error).__name__}: {error}")
            return False
        return True

    def _die(self, message: str) -> None:
        self.failed = message
        logger.critical("local socket cannot go on: %s", message)
        if self.on_fatal is not None:
            try:
                self.on_fatal(message)
            except Exception:
                logger.exception("local socket: on_fatal failed")

    def _turn(self) -> bool:
        """One turn: wait for I/O (not at all when requests wait for their turn), handle it,
        serve in fair order, sweep deadlines on the tick. True once stopped."""
        waiting = self._ready_privileged or self._ready_users
        events = self._selector.select(0 if waiting else max(0.0, self._tick - time.monotonic()))
        self._dispatch(events, time.monotonic())
        self._deliver_replies()
        self._serve_ready()
        now = time.monotonic()
        if now >= self._tick:
            self._tick = now + _TICK
            self._sweep(now)
        return self._stop_at is not None and self._stopping(now, self._stop_at)

    def _guarded(self, connection: _Connection, function, *args):
        """``function(*args)``; an exception closes only this connection (counted, logged): None."""
        try:
            return function(*args)
        except Exception:
            self._connection_failed(connection)

    def _connection_failed(self, connection: _Connection) -> None:
        self.service.metrics.local_socket_errors.inc()
        logger.exception("local socket: error on a connection of uid %s; closing it", connection.uid)
        try:
            self._close(connection)
        except Exception:
            logger.exception("local socket: could not close the connection")

    def _on_event(self, connection: _Connection, mask: int) -> None:   # type: ignore[override]
        try:
            if mask & selectors.EVENT_WRITE:
                if self._flush(connection):
                    self._take_line(connection)
            else:
                self._read(connection)
        except Exception:
            self._connection_failed(connection)

    def _stopping(self, now: float, stop_at: float) -> bool:
        """Past stop(): no more accepts; True once the calls in flight and those waiting for their
        turn are answered, or grace (until ``stop_at``) ran out."""
        self._unlisten()
        idle = self._running == 0 and not self._ready_privileged and not self._ready_users
        return idle or now >= stop_at

    def _sweep(self, now: float) -> None:
        """Cut off connections past their deadline; resume accepting after a pause."""
        self._resume_accepts(now)
        for connection in [c for c in self._connections.values()
                           if c.deadline <= now and not c.calling and c.line is None]:
            if connection.received and not connection.unsent:   # a line begun, not finished
                send_best_effort(connection.sock, encode(
                    {"ok": False, "error": f"request line not complete within {self.request_timeout:g} s"}))
            self._close(connection)     # else idle, or not reading its reply: closed without a word

    # ------------------------------------------------------------------ connections
    def _accept(self, now: float) -> None:
        self._accept_connections(now, _ACCEPTS_PER_ROUND)

    def _accept_failed(self, error: OSError, now: float) -> None:
        """A broken listener is raised; anything else is counted, and out of descriptors pauses."""
        if error.errno in _ACCEPT_BROKEN_ERRNOS:
            raise error
        self.service.metrics.local_socket_errors.inc()
        if error.errno not in ACCEPT_PAUSE_ERRNOS:
            logger.warning("local socket: accept failed (%s); going on", error)
            return
        super()._accept_failed(error, now)

    def _admit(self, sock: socket.socket, peer, now: float) -> None:
        try:
            sock.setblocking(False)
            uid = _peer_uid(sock)
            privileged = self.service.privileged(uid)
            if privileged:
                # the hooks' own callers are bounded by the total only, and have slots no user can take
                full = len(self._connections) >= self.max_connections
            else:
                full = (self._user_connections >= self.max_connections - self.reserved_connections
                        or self._per_uid.get(uid, 0) >= self.max_connections_per_user)
            if full:
                self.service.metrics.rejected.inc()
                refuse(sock, BUSY)
                return
            connection = _Connection(sock, uid, privileged,
                                     self.max_line_bytes if privileged else self.user_line_bytes,
                                     now + self.idle_timeout)
            self._connections[sock.fileno()] = connection
            self._per_uid[uid] = self._per_uid.get(uid, 0) + 1
            self._user_connections += not privileged
            self._watch(connection, selectors.EVENT_READ)
            self._read(connection)   # the hooks send their line right after connecting
        except Exception:
            self.service.metrics.local_socket_errors.inc()
            logger.exception("local socket: could not admit a connection")
            admitted = self._connections.get(sock.fileno()) if sock.fileno() >= 0 else None
            if admitted is not None:
                self._close(admitted)
            else:
                sock.close()

    def _read(self, connection: _Connection) -> None:
        line_begins = not connection.received
        if self._receive(connection):
            if line_begins:
                connection.deadline = time.monotonic() + self.request_timeout   # from a line's first byte
            self._take_line(connection)

    def _take_line(self, connection: _Connection) -> None:
        """The connection's next whole line waits for its turn; until it is answered nothing more
        is read from it (the kernel's buffer holds the rest of a pipeline)."""
        if connection.closed or connection.line is not None or connection.calling or connection.unsent:
            return
        received = connection.received
        end = received.find(b"\n")
        if end < 0 and len(received) <= connection.line_limit:
            if not received:
                connection.deadline = time.monotonic() + self.idle_timeout
            self._watch(connection, selectors.EVENT_READ)
            return      # the rest of the line is still on its way
        if end < 0 or end >= connection.line_limit:
            self._reply(connection, encode(
                {"ok": False, "error": f"request line longer than {connection.line_limit} bytes"}), close=True)
            return
        connection.line = bytes(received[:end + 1])
        del received[:end + 1]
        connection.ready_at = time.monotonic()
        if received:    # the next line has begun: it has request_timeout from now
            connection.deadline = connection.ready_at + self.request_timeout
        self._watch(connection, 0)
        if connection.privileged:
            self._ready_privileged.append(connection)
        else:
            waiting = self._ready_users.get(connection.uid)
            if waiting is None:
                waiting = self._ready_users[connection.uid] = collections.deque()
            waiting.append(connection)

    # ------------------------------------------------------------------ fair turns
    def _serve_ready(self) -> None:
        """Every privileged request waiting, then one unprivileged request, the next uid's turn."""
        for _ in range(len(self._ready_privileged)):
            connection = self._ready_privileged.popleft()
            if not connection.closed and not self._guarded_start(connection):
                self._ready_privileged.append(connection)    # waits for a worker
        for _ in range(len(self._ready_users)):
            uid, waiting = next(iter(self._ready_users.items()))
            while waiting and waiting[0].closed:
                waiting.popleft()
            if not waiting:
                del self._ready_users[uid]
                continue
            self._ready_users.move_to_end(uid)     # its next request after every other uid's
            if self._guarded_start(waiting[0]):
                waiting.popleft()
                if not waiting:
                    del self._ready_users[uid]
                return

    def _guarded_start(self, connection: _Connection) -> bool:
        return self._guarded(connection, self._start, connection) is not False   # failed: closed, done

    def _start(self, connection: _Connection) -> bool:
        """Answer the connection's waiting line (on this thread or a worker's); False when it
        needs a worker and none is free."""
        line = connection.line
        assert line is not None, "a connection waits for its turn only with a line"
        method = _method_of(line)
        if time.monotonic() - connection.ready_at > self.max_lag:
            connection.line = None
            self.service.metrics.rejected.inc()
            self._reply(connection, BUSY, close=True)
            return True
        if not connection.privileged and method and WHO_MAY_CALL[method][1] != ANYONE:
            # refused by the service's own rule, on an empty request: nothing of the line is parsed
            connection.line = None
            if self._reply(connection, encode(self._call(method, REQUESTS[method](), connection.uid))):
                self._take_line(connection)
            return True
        if method in self.inline and len(line) <= self.user_line_bytes:
            connection.line = None
            if self._reply(connection, self._answer(line, connection.uid)):   # no thread hand-off
                self._take_line(connection)
            return True
        if self._running >= self.workers:
            return False
        connection.line = None
        connection.calling = True
        self._running += 1
        self._work.put((connection, line))
        return True

    def _work_loop(self) -> None:
        """A worker: answer lines the loop hands over, hand the replies back."""
        while True:
            item = self._work.get()
            if item is None:
                return
            connection, line = item
            try:
                reply = self._answer(line, connection.uid)
            except Exception:   # handle_line raises for no input: a bug; this client gets no answer
                logger.exception("local call failed")
                reply = None
            self._replies.append((connection, reply))
            self._wake()

    def _deliver_replies(self) -> None:
        while self._replies:
            connection, reply = self._replies.popleft()
            self._running -= 1
            connection.calling = False
            if connection.closed:
                continue
            if reply is None:
                self._close(connection)
            elif self._reply(connection, reply):
                self._take_line(connection)

    def _reply(self, connection: _Connection, data: bytes, close: bool = False) -> bool:
        """Send ``data`` (then close, if asked); True when all of it went out at once."""
        connection.unsent += data
        connection.close_when_sent = connection.close_when_sent or close
        return self._flush(connection)

    def _flush(self, connection: _Connection) -> bool:
        if not self._send_unsent(connection):
            if not connection.closed:
                # the client does not read: wait for room, read nothing more, cut it off at the deadline
                connection.deadline = time.monotonic() + self.request_timeout
                self._watch(connection, selectors.EVENT_WRITE)
            return False
        if connection.close_when_sent:
            self._close(connection)
            return False
        return True

    def _forget(self, connection: _Connection) -> None:   # type: ignore[override]
        connection.line = None      # and left in a ready queue, skipped when its turn comes
        left = self._per_uid.pop(connection.uid, 1) - 1
        if left:
            self._per_uid[connection.uid] = left
        self._user_connections -= not connection.privileged

    # ------------------------------------------------------------------ calls
    def _answer(self, line: bytes, uid) -> bytes:
        return encode(self.handle_line(line, uid))

    def handle_line(self, line: bytes, caller_uid: int | None) -> dict:
        """One request line from ``caller_uid`` -> the reply object (never raises for bad input)."""
        try:
            method, body = line_json.read_envelope(line, REQUESTS)
            privileged = self.service.privileged(caller_uid)
            if not privileged and WHO_MAY_CALL[method][1] != ANYONE:
                return self._call(method, REQUESTS[method](), caller_uid)   # refused before parsing
            request = line_json.parse_request(method, body, self.service.request_bounds, privileged)
        except Refused as refused:
            return refused.reply
        return self._call(method, request, caller_uid)

    def _call(self, method: str, request, caller_uid: int | None) -> dict:
        return line_json.call(self.service, method, request, caller_uid, "local")


def _method_of(line: bytes) -> str:
    """The method a request line names, cheaply: the hooks and the CLI put it first."""
    head = line[:40]
    for method in REQUESTS:
        if head.startswith(b'{"method":"' + method.encode() + b'"') or head.startswith(b'{"method": "' + method.encode() + b'"'):
            return method
    return ""


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
