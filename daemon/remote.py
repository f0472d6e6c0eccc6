"""The remote listener: users on login and compute nodes ask the controller's daemon over TCP.

The local socket (:mod:`.hookserver`) learns its caller from the kernel, which only works on
the daemon's host. Elsewhere the identity comes from what the site already trusts for Slurm
itself: MUNGE (:mod:`.munge`). A remote request is the local socket's line with one more
field, a credential the caller's munged made::

    {"method": "Predict", "request": {...}, "credential": "MUNGE:...:"}\\n
    -> {"ok": true, "response": {...}}\\n      (then the listener closes the connection)

The credential's payload is :func:`.munge.request_digest` of the *call*, the line's object
without ``credential`` encoded canonically (:func:`.munge.canonical_call`: keys sorted, no spaces,
ASCII). The listener decodes the credential with its own munged (same site key), checks that
the payload is the digest of the call it parsed, and hands the call to the same
``PredictionService.call`` with the uid munged vouched for: the same per-call rules as the
local socket (a user predicts only their own jobs). A credential made with another key, one
expired (munged's TTL, 300 s by default), one decoded before (munged's replay cache) or one
made for another request is refused with ``"code": "UNAUTHENTICATED"``. Only the calls
anyone may make (``Predict``) are served here; admin and history-writing calls are refused
whoever asks (``PERMISSION_DENIED``): they belong to the controller's local socket.

Nothing here is encrypted: the request (a job script) and the reply cross the network in
clear, as ``srun``'s do. The port belongs on the cluster's internal network (ADMIN.md).

Bounded like the local socket, and smaller, since it shares the daemon's interpreter with the
hook path: one request per connection, at most ``max_connections`` open and
``max_connections_per_host`` from one address; the request line must arrive whole within
``request_timeout`` of the connect and be at most ``max_line_bytes``; at most ``max_rate``
connections a second are accepted in all (the rest wait in the kernel's backlog, which drops
what does not fit) and ``max_rate_per_user`` calls a second are made for one uid, so what
remote users cost the daemon (whose hook path shares the interpreter) has a ceiling; calls
(each a munged round trip, then the service) run on ``workers`` threads, at most
``max_pending`` running or waiting and ``max_calls_per_user`` of one uid; past any of these,
``busy`` at once. One thread multiplexes every connection with ``selectors``: a slow client
holds no thread.
"""
from __future__ import annotations

import json
import logging
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from google.protobuf import json_format

from . import munge
from .config import host_port
from .connections import Connection, SelectorServer, listening_socket, refuse
from .munge import canonical_call
from .service import ANYONE, METHODS as RULES, error_message, status_name
from ..proto.v1 import hpcpredict_pb2 as pb

logger = logging.getLogger(__name__)

_SERVICE = pb.DESCRIPTOR.services_by_name["Predictor"]
_REQUESTS = {method.name: getattr(pb, method.input_type.name) for method in _SERVICE.methods}
#: The calls served remotely: those anyone may make. The rest are refused before any work.
REMOTE_METHODS = frozenset(name for name, (_, who) in RULES.items() if who == ANYONE)
BUSY = b'{"ok":false,"error":"busy"}\n'
_TICK = 0.1
_ACCEPTS_PER_ROUND = 32


def _encode(reply: dict) -> bytes:
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def _unauthenticated(reason: str) -> dict:
    return {"ok": False, "code": "UNAUTHENTICATED", "error": f"credential refused: {reason}"}


class _Connection(Connection):
    __slots__ = ("host",)

    def __init__(self, sock: socket.socket, host: str, deadline: float):
        super().__init__(sock, deadline)
        self.host = host


class RemoteServer(SelectorServer):
    """Serve ``service``'s user calls to MUNGE-authenticated callers on TCP ``address``."""

    name = "remote listener"
    thread_name = "remote-listener"

    def __init__(self, address: str, service, *, munge_socket: str = "", max_line_bytes: int = 2 << 20,
                 workers: int = 1, max_pending: int = 16, max_connections: int = 128,
                 max_connections_per_host: int = 32, max_calls_per_user: int = 4, max_rate: float = 100.0,
                 max_rate_per_user: float = 10.0, request_timeout: float = 5.0):
        super().__init__()
        self.host, self.port = host_port(address)
        self.service = service
        self.munge_socket = munge_socket
        self.max_line_bytes = max_line_bytes
        self.max_pending = max_pending
        self.max_connections = max_connections
        self.max_connections_per_host = max_connections_per_host
        self.max_calls_per_user = max_calls_per_user
        self.request_timeout = request_timeout
        self.max_rate_per_user = max_rate_per_user
        self._rate = _TokenBucket(max_rate)     # loop thread only
        self._user_rates: dict[int, _TokenBucket] = {}   # workers, under _lock
        self.address: tuple[str, int] | None = None   # where it listens, once started
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="remote-call")
        self._connections: dict[int, _Connection] = {}   # type: ignore[assignment]
        self._per_host: dict[str, int] = {}
        self._pending = 0                       # loop thread only
        self._per_uid: dict[int, int] = {}      # workers, under _lock
        self._lock = threading.Lock()
        self._replies: list = []                # (connection, reply bytes) from workers, under _lock

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "RemoteServer":
        family, _, _, _, sockaddr = socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        listener = listening_socket(family, sockaddr, 128)
        self.address = listener.getsockname()[:2]
        self._serve(listener)
        logger.info("remote listener on %s:%d (MUNGE-authenticated %s)", self.address[0], self.address[1],
                    ", ".join(sorted(REMOTE_METHODS)))
        return self

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting; answer the calls in flight for up to ``grace`` seconds, then close."""
        if not self._stop_loop(grace):
            return
        self._pool.shutdown(wait=False, cancel_futures=True)
        logger.info("remote listener stopped")

    # ------------------------------------------------------------------ the loop
    def _turn(self) -> bool:
        events = self._selector.select(_TICK)
        self._dispatch(events, time.monotonic())
        self._deliver()
        now = time.monotonic()
        self._sweep(now)
        if self._stop_at is not None:
            self._unlisten()
            return self._pending == 0 or now >= self._stop_at
        return False

    def _sweep(self, now: float) -> None:
        self._resume_accepts(now)
        for connection in [c for c in self._connections.values() if c.deadline <= now and c.events]:
            if connection.unsent:   # the reply is not read: cut off without a word
                self._close(connection)
            else:
                self._send_last(connection, _encode({
                    "ok": False, "error": f"request line not complete within {self.request_timeout:g} s"}))

    def _accept(self, now: float) -> None:
        # At most the rate's tokens: past it, connections wait in the kernel's backlog (it drops
        # what does not fit) instead of spending the interpreter on them; resumed at the next tick.
        allowed = self._rate.take_up_to(_ACCEPTS_PER_ROUND, now)
        taken = self._accept_connections(now, allowed)
        self._rate.give_back(allowed - taken)
        if taken == allowed < _ACCEPTS_PER_ROUND:
            self._pause_accepts(now + _TICK / 2)

    def _admit(self, sock: socket.socket, peer, now: float) -> None:
        sock.setblocking(False)
        host = peer[0]
        if len(self._connections) >= self.max_connections or \
                self._per_host.get(host, 0) >= self.max_connections_per_host:
            self.service.metrics.rejected.inc()
            refuse(sock, BUSY, half_close=True)
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(sock, host, now + self.request_timeout)   # from the connect
        self._connections[sock.fileno()] = connection
        self._per_host[host] = self._per_host.get(host, 0) + 1
        self._watch(connection, selectors.EVENT_READ)

    def _on_event(self, connection: _Connection, mask: int) -> None:   # type: ignore[override]
        if mask & selectors.EVENT_WRITE:
            self._flush(connection)
        elif self._receive(connection):
            self._take_line(connection)

    def _take_line(self, connection: _Connection) -> None:
        end = connection.received.find(b"\n")
        if end < 0 and len(connection.received) <= self.max_line_bytes:
            return
        if end < 0 or end >= self.max_line_bytes:
            self._send_last(connection, _encode(
                {"ok": False, "error": f"request line longer than {self.max_line_bytes} bytes"}))
            return
        line = bytes(connection.received[:end])
        connection.received = bytearray()
        if self._pending >= self.max_pending:
            self.service.metrics.rejected.inc()
            self._send_last(connection, BUSY)
            return
        self._pending += 1
        self._watch(connection, 0)      # nothing more is read: one request per connection
        self._pool.submit(self._work, connection, line)

    def _work(self, connection: _Connection, line: bytes) -> None:
        try:
            reply = _encode(self.handle_line(line, connection.host))
        except Exception:
            logger.exception("remote call failed")
            reply = _encode({"ok": False, "error": "internal error", "code": "INTERNAL"})
        with self._lock:
            self._replies.append((connection, reply))
        self._wake()

    def _deliver(self) -> None:
        with self._lock:
            replies, self._replies = self._replies, []
        for connection, reply in replies:
            self._pending -= 1
            if not connection.closed:
                self._send_last(connection, reply)

    def _send_last(self, connection: _Connection, data: bytes) -> None:
        """Send the one reply of this connection, then close it once sent."""
        connection.unsent += data
        connection.deadline = time.monotonic() + self.request_timeout
        self._flush(connection)

    def _flush(self, connection: _Connection) -> None:
        if self._send_unsent(connection):
            self._close(connection)
        elif not connection.closed:
            self._watch(connection, selectors.EVENT_WRITE)

    def _forget(self, connection: _Connection) -> None:   # type: ignore[override]
        left = self._per_host.pop(connection.host, 1) - 1
        if left:
            self._per_host[connection.host] = left
        try:
            connection.sock.shutdown(socket.SHUT_WR)   # the reply is delivered before the close
        except OSError:
            pass

    # ------------------------------------------------------------------ calls
    def _user_rate(self, uid: int) -> _TokenBucket:
        """``uid``'s bucket (under _lock); buckets back to full are forgotten once there are many."""
        bucket = self._user_rates.get(uid)
        if bucket is None:
            if len(self._user_rates) >= 1024:
                now = time.monotonic()
                self._user_rates = {u: b for u, b in self._user_rates.items() if not b.full(now)}
            bucket = self._user_rates[uid] = _TokenBucket(self.max_rate_per_user)
        return bucket

    def handle_line(self, line: bytes, host: str = "?") -> dict:
        """One remote request line -> the reply object (never raises for bad input)."""
        try:
            envelope = json.loads(line)
        except RecursionError:
            return {"ok": False, "error": "request is not JSON we accept: nested too deeply"}
        except (UnicodeDecodeError, ValueError) as error:
            return {"ok": False, "error": f"request is not JSON: {error}"}
        if not isinstance(envelope, dict):
            return {"ok": False, "error": "request must be a JSON object"}
        method = envelope.get("method")
        if not isinstance(method, str) or method not in _REQUESTS:
            return {"ok": False, "error": f"method: must be one of {', '.join(sorted(REMOTE_METHODS))}, got {method!r}"}
        if method not in REMOTE_METHODS:
            return {"ok": False, "code": "PERMISSION_DENIED",
                    "error": f"{method} is not served remotely: admin and history-writing calls are made on the "
                             f"daemon's host, on its local socket"}
        credential = envelope.get("credential")
        if not isinstance(credential, str) or not credential:
            return _unauthenticated("none sent (the remote listener learns who you are from a MUNGE credential; "
                                    "`hpcpredict predict` makes one with this host's munged)")
        try:
            vouched = munge.decode(credential, self.munge_socket)
        except munge.MungeError as error:
            if error.code == munge.EMUNGE_SOCKET:   # our munged, not the caller, is at fault
                logger.error("remote listener: munged unreachable: %s", error)
                self.service.faults.set("munge", "decode remote credentials", str(error))
                return {"ok": False, "code": "UNAVAILABLE",
                        "error": "the daemon's munged does not answer, so no caller can be identified"}
            logger.info("remote %s from %s refused: credential: %s", method, host, error)
            advice = _ADVICE.get(error.code, "not a MUNGE credential of this site")
            return _unauthenticated(f"{error} ({advice})")
        self.service.faults.clear("munge", "decode remote credentials")
        try:
            digest = munge.request_digest(canonical_call(envelope))
        except (RecursionError, ValueError):
            return {"ok": False, "error": "request is not JSON we accept: nested too deeply"}
        if vouched.payload != digest:
            logger.info("remote %s from %s (uid %d) refused: credential made for another request",
                        method, host, vouched.uid)
            return _unauthenticated("it was made for another request")
        body = envelope.get("request", {})
        if not isinstance(body, dict):
            return {"ok": False, "error": "request: must be a JSON object"}
        try:
            request = json_format.ParseDict(body, _REQUESTS[method]())
        except json_format.ParseError as error:
            return {"ok": False, "error": f"request: {error}", "code": "INVALID_ARGUMENT"}
        except RecursionError:
            return {"ok": False, "error": "request: nested too deeply", "code": "INVALID_ARGUMENT"}
        with self._lock:
            calls = self._per_uid.get(vouched.uid, 0)
            if calls >= self.max_calls_per_user or not self._user_rate(vouched.uid).take(time.monotonic()):
                return {"ok": False, "error": "busy"}
            self._per_uid[vouched.uid] = calls + 1
        try:
            response = self.service.call(method, request, vouched.uid)
        except Exception as error:
            code = status_name(error)
            logger.info("remote %s from %s (uid %d) refused (%s): %s", method, host, vouched.uid, code, error)
            return {"ok": False, "error": error_message(method, error), "code": code}
        finally:
            with self._lock:
                left = self._per_uid.pop(vouched.uid) - 1
                if left:
                    self._per_uid[vouched.uid] = left
        return {"ok": True, "response": json_format.MessageToDict(
            response, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)}


class _TokenBucket:
    """At most ``rate`` takes a second on average, ``rate`` (at least 1) at once."""

    __slots__ = ("rate", "burst", "tokens", "stamp")

    def __init__(self, rate: float):
        self.rate = rate
        self.burst = max(1.0, rate)
        self.tokens = self.burst
        self.stamp = time.monotonic()

    def take(self, now: float) -> bool:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True

    def take_up_to(self, count: int, now: float) -> int:
        """Take as many of ``count`` as there are whole tokens; how many were taken."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        taken = min(count, int(self.tokens))
        self.tokens -= taken
        return taken

    def give_back(self, count: int) -> None:
        self.tokens = min(self.burst, self.tokens + count)

    def full(self, now: float) -> bool:
        return self.tokens + (now - self.stamp) * self.rate >= self.burst


#: What a refused credential means, in the caller's terms (munge_err_t -> advice)
_ADVICE = {
    munge.EMUNGE_CRED_REPLAYED: "a credential is good for one request; the CLI makes a new one for each",
    munge.EMUNGE_CRED_EXPIRED: "check that the clocks of this host and the daemon's agree (NTP)",
    munge.EMUNGE_CRED_REWOUND: "check that the clocks of this host and the daemon's agree (NTP)",
    munge.EMUNGE_CRED_INVALID: "made with another key than the daemon's munged: every host needs the site's munge.key",
}
