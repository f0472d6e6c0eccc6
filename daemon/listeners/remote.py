"""The remote listener: users on login and compute nodes ask the controller's daemon over TCP.

The local socket (:mod:`.local_socket`) learns its caller from the kernel, which only works on
the daemon's host. Elsewhere the identity comes from what the site already trusts for Slurm
itself: MUNGE (:mod:`..munge`). Nothing a caller sends is read past a few kilobytes, nor parsed,
before munged has said who sent it: a request is a frame (:mod:`..remote_wire`) whose header
line carries the caller's credential, and its body (the local socket's JSON call) is read only
once that credential is decoded::

    HPCPREDICT/2 <length> <credential>\n
    <- HPCPREDICT/2 <length> <the daemon's credential>\n{"ok": true, "continue": true}\n
    {"method": "Predict", "request": {...}}
    <- HPCPREDICT/2 <length> <the daemon's credential>\n{"ok": true, "response": {...}}\n

1. **Before authentication** a connection may hold at most ``HEADER_BYTES`` (4 KiB) of what
   it sent, the header line: a line that is not a header, or longer, is refused at once. At
   most ``max_connections_per_host`` connections of one address wait for their credential
   to be checked (``max_connections`` in all); past either, the oldest one of them that has
   not sent its header yet is cut off for the new one (a client sends its header with its
   connect, so idle connections make room), else ``busy``.
2. **The credential**, decoded by the daemon's munged (same site key) on a worker thread: one
   made with another key, expired (munged's TTL, 300 s by default), decoded before (munged's
   replay cache, and the listener's own: it remembers each credential it accepted until the
   credential expires, so a captured request is refused also after munged restarts), or not
   made for an hpcpredict request is refused with ``"code": "UNAUTHENTICATED"``. Once the uid
   is known: at most ``max_connections_per_user`` of its connections past this point and
   ``max_rate_per_user`` a second, else ``busy``. Then the daemon answers a go-ahead signed
   as its replies are (4.): the CLI sends the body (a job script) only to the daemon.
3. **The body**, at most ``max_body_bytes`` (the local socket's ``user_line_bytes``: a remote
   caller is an ordinary user), must be the one the credential's payload names (its SHA-256),
   then the local socket's item limits (:func:`.line_json.too_many_items`, ``[limits]``) are
   checked before it is turned into a message, then ``PredictionService.call`` with the uid
   munged vouched for: the same per-call rules as the local socket (a user predicts only their
   own jobs). Only the calls anyone may make (``Predict``) are served here; admin and
   history-writing calls are refused whoever asks (``PERMISSION_DENIED``).
4. **The reply** carries a credential the daemon's munged made for the daemon's uid, its
   payload binding the request's header and the reply's body: the CLI believes an answer
   only if it decodes to the daemon's user (``[client] daemon_user``), so a user who took the
   port answers nothing anyone believes. What the listener refuses before a credential was
   checked goes unsigned (the CLI trusts nothing of it but ``busy``).

Every refusal is counted (``hpcpredict_remote_refusals{reason}``) and logged, at most once per
``_LOG_EVERY_S`` per reason with the count of those not logged. A whole request must arrive
within ``request_timeout`` of the connect; at most ``max_rate`` connections a second are
accepted in all (the rest wait in the kernel's backlog, which drops what does not fit); calls
run on ``workers`` threads, at most ``max_pending`` running or waiting. One thread multiplexes
every connection with ``selectors``: a slow client holds no thread.

Nothing here is encrypted: the request (a job script) and the reply cross the network in
clear, as ``srun``'s do. The port belongs on the cluster's internal network, below 1024 so no
user of the controller can bind it (ADMIN.md).
"""
from __future__ import annotations

import hashlib
import heapq
import logging
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from . import line_json
from .. import munge
from ..config import host_port
from .connections import READ_BYTES, Connection, SelectorServer, listening_socket, refuse, send_best_effort
from .line_json import BUSY_REPLY, Refused, encode
from ..remote_wire import HEADER_BYTES, MAGIC, UNSIGNED, FrameError, frame, parse_header, reply_digest, request_digest
from ..service import ANYONE, RPCS as WHO_MAY_CALL

if TYPE_CHECKING:
    from ..service import PredictionService

logger = logging.getLogger(__name__)

#: The calls served remotely: those anyone may make. The rest are refused before any work.
REMOTE_METHODS = frozenset(name for name, (_, who) in WHO_MAY_CALL.items() if who == ANYONE)
_LISTED = tuple(sorted(REMOTE_METHODS))   # what a request naming no RPC is told
_TICK = 0.1
_ACCEPTS_PER_ROUND = 32
_LOG_EVERY_S = 10.0
_REQUEST_PREFIX = request_digest(b"")[:-64]
#: A credential the listener accepted is remembered this long past its expiry (clock skew
#: between the hosts: munged's own allowance is smaller)
_REPLAY_MARGIN_S = 60.0

# where a connection is (loop thread only)
_HEADER, _AUTH, _BODY, _CALL, _REPLY = range(5)


def _unauthenticated(reason: str) -> dict:
    return {"ok": False, "code": "UNAUTHENTICATED", "error": f"credential refused: {reason}"}


BUSY = frame(encode(BUSY_REPLY), "")
#: The daemon's answer to a header whose credential it accepted: send the body now
GO_AHEAD = {"ok": True, "continue": True}


class _Connection(Connection):
    __slots__ = ("host", "stage", "header", "length", "uid", "payload")

    def __init__(self, sock: socket.socket, host: str, deadline: float):
        super().__init__(sock, deadline)
        self.host = host
        self.stage = _HEADER
        self.header = b""          # the request's header line, once whole
        self.length = 0            # of the body it announces
        self.uid: int | None = None   # once munged vouched for it (counted in _per_uid)
        self.payload = b""         # what the credential says the body's digest is


class _Refusals:
    """Counted in the metrics by reason, and logged at most once per _LOG_EVERY_S per reason
    (with how many were not): a flood costs the log a line every few seconds, not one a request."""

    def __init__(self, metrics):
        self.counter = metrics.remote_refusals if metrics is not None else None
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}

    def __call__(self, reason: str, host: str, detail: str) -> None:
        if self.counter is not None:
            self.counter.labels(reason).inc()
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(reason, -_LOG_EVERY_S) < _LOG_EVERY_S:
                self._unlogged[reason] = self._unlogged.get(reason, 0) + 1
                return
            self._last[reason] = now
            unlogged = self._unlogged.pop(reason, 0)
        logger.warning("remote listener refused a request from %s (%s): %s%s", host, reason, detail,
                       f" (and {unlogged} more of these in the last {_LOG_EVERY_S:g} s, not logged)" if unlogged else "")


class SeenCredentials:
    """The credentials the listener accepted, by digest, until each one expires: a replay is
    refused even after munged (whose replay cache is in its memory) restarts. At most
    ``max_entries``: when every one is still live, new credentials are refused (``busy``)
    rather than one forgotten early."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._expiry: dict[bytes, float] = {}
        self._heap: list[tuple[float, bytes]] = []
        self._lock = threading.Lock()

    def add(self, credential: str, expires: float, now: float | None = None) -> bool | None:
        """True if new (now remembered), False if seen before, None if full."""
        key = hashlib.sha256(credential.encode("ascii", "replace")).digest()
        now = time.time() if now is None else now
        with self._lock:
            while self._heap and self._heap[0][0] <= now:
                _, old = heapq.heappop(self._heap)
                self._expiry.pop(old, None)
            if key in self._expiry:
                return False
            if len(self._expiry) >= self.max_entries:
                return None
            until = expires + _REPLAY_MARGIN_S
            self._expiry[key] = until
            heapq.heappush(self._heap, (until, key))
            return True

    def __len__(self) -> int:
        return len(self._expiry)


class RemoteServer(SelectorServer):
    """Serve ``service``'s user calls to MUNGE-authenticated callers on TCP ``address``."""

    name = "remote listener"
    thread_name = "remote-listener"

    def __init__(self, address: str, service: PredictionService, *, munge_socket: str = "", max_body_bytes: int = 128 << 10,
                 workers: int = 1, max_pending: int = 16, max_connections: int = 128,
                 max_connections_per_host: int = 8, max_connections_per_user: int = 4, max_rate: float = 100.0,
                 max_rate_per_user: float = 10.0, request_timeout: float = 5.0):
        super().__init__()
        self.host, self.port = host_port(address)
        self.service = service
        self.munge_socket = munge_socket
        self.max_body_bytes = max_body_bytes
        self.max_pending = max_pending
        self.max_connections = max_connections
        self.max_connections_per_host = max_connections_per_host
        self.max_connections_per_user = max_connections_per_user
        self.request_timeout = request_timeout
        self.max_rate_per_user = max_rate_per_user
        self.refused = _Refusals(service.metrics if service is not None else None)
        # every credential accepted within a TTL (and its margin) at the accept rate fits
        self.seen = SeenCredentials(max(65536, int(max_rate * (munge.DEFAULT_TTL_S + _REPLAY_MARGIN_S) * 2)))
        self._rate = _TokenBucket(max_rate)     # loop thread only
        self._user_rates: dict[int, _TokenBucket] = {}   # workers, under _lock
        self.address: tuple[str, int] | None = None   # where it listens, once started
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="remote-call")
        self._connections: dict[int, _Connection] = {}   # type: ignore[assignment]
        self._unauthenticated: dict[str, int] = {}   # connections of an address not past their credential
        self._pending = 0                       # loop thread only
        self._per_uid: dict[int, int] = {}      # connections past their credential, by uid; under _lock
        self._lock = threading.Lock()
        self._events: list = []                 # what workers hand back to the loop, under _lock

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
            if connection.stage == _REPLY:   # the reply is not read: cut off without a word
                self._close(connection)
            else:
                self.refused("timeout", connection.host, f"request not complete within {self.request_timeout:g} s")
                self._send_last(connection, frame(encode({
                    "ok": False, "error": f"request not complete within {self.request_timeout:g} s"}), ""))

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
        if len(self._connections) >= self.max_connections and not self._make_room(None):
            self.refused("connections", host, f"{self.max_connections} remote connections open")
            refuse(sock, BUSY, half_close=True)
            return
        if self._unauthenticated.get(host, 0) >= self.max_connections_per_host and not self._make_room(host):
            self.refused("connections", host, f"{self.max_connections_per_host} connections of this address "
                                              f"wait for their credential")
            refuse(sock, BUSY, half_close=True)
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection = _Connection(sock, host, now + self.request_timeout)   # from the connect
        self._connections[sock.fileno()] = connection
        self._unauthenticated[host] = self._unauthenticated.get(host, 0) + 1
        self._watch(connection, selectors.EVENT_READ)

    def _make_room(self, host: str | None) -> bool:
        """Cut off the oldest connection (of ``host``, or of any) that has not sent its header:
        a client sends it with the connect, so only idle ones are cut. What a candidate sent
        and was not read yet is read first: a header that arrived takes it past this stage."""
        for connection in list(self._connections.values()):   # in the order they were accepted
            if connection.stage != _HEADER or (host is not None and connection.host != host):
                continue
            self._on_event(connection, selectors.EVENT_READ)
            if connection.closed:
                return True
            if connection.stage == _HEADER:
                self.refused("idle", connection.host, "no header yet; cut off for a new connection")
                send_best_effort(connection.sock, BUSY)
                self._close(connection)
                return True
        return False

    def _on_event(self, connection: _Connection, mask: int) -> None:   # type: ignore[override]
        if mask & selectors.EVENT_WRITE:
            self._flush(connection)
        elif connection.stage == _HEADER:
            if self._receive(connection, min(READ_BYTES, HEADER_BYTES - len(connection.received))):
                self._take_header(connection)
        elif connection.stage == _BODY:
            if self._receive(connection, min(READ_BYTES, max(1, connection.length - len(connection.received)))):
                self._take_body(connection)

    def _take_header(self, connection: _Connection) -> None:
        received = connection.received
        end = received.find(b"\n")
        if end < 0:
            if not MAGIC.startswith(bytes(received[:len(MAGIC)])):
                self._refuse_header(connection, "not an HPCPREDICT/2 request: this listener reads a MUNGE "
                                                "credential before anything else (is `hpcpredict` on this host "
                                                "older than the daemon?)")
            elif len(received) >= HEADER_BYTES:
                self._refuse_header(connection, f"header line longer than {HEADER_BYTES} bytes")
            return
        try:
            connection.length, credential = parse_header(bytes(received[:end]), max_length=self.max_body_bytes)
        except FrameError as error:
            self._refuse_header(connection, str(error))
            return
        connection.header = bytes(received[:end])
        del received[:end + 1]       # what is left is the body's beginning
        connection.stage = _AUTH
        self._watch(connection, 0)   # nothing more is read until munged says who this is
        self._submit(connection, self._authenticate, connection, credential)

    def _refuse_header(self, connection: _Connection, message: str) -> None:
        self.refused("header", connection.host, message)
        self._send_last(connection, frame(encode({"ok": False, "error": message}), ""))

    def _take_body(self, connection: _Connection) -> None:
        if len(connection.received) < connection.length:
            self._watch(connection, selectors.EVENT_READ)
            return
        body = bytes(connection.received[:connection.length])
        connection.received = bytearray()
        connection.stage = _CALL
        self._watch(connection, 0)      # one request per connection: nothing more is read
        self._submit(connection, self._call, connection, body)

    def _submit(self, connection: _Connection, work, *args) -> None:
        if self._pending >= self.max_pending:
            self.refused("busy", connection.host, f"{self.max_pending} requests in the workers")
            self._send_last(connection, BUSY)
            return
        self._pending += 1
        self._pool.submit(self._guarded, connection, work, *args)

    def _guarded(self, connection: _Connection, work, *args) -> None:
        try:
            event = work(*args)
        except Exception:
            logger.exception("remote call failed")
            event = ("reply", connection, self._signed(connection, {"ok": False, "error": "internal error",
                                                                     "code": "INTERNAL"}))
        with self._lock:
            self._events.append(event)
        self._wake()

    def _deliver(self) -> None:
        with self._lock:
            events, self._events = self._events, []
        for kind, connection, value in events:
            self._pending -= 1
            if kind == "authenticated":
                uid, connection.payload, go_ahead = value
                if connection.closed:
                    self._release(uid)
                    continue
                connection.uid = uid
                self._count_unauthenticated(connection.host, -1)
                connection.stage = _BODY
                connection.unsent += go_ahead   # then the body is read (_flush)
                self._flush(connection)
            elif not connection.closed:
                self._send_last(connection, value)

    def _send_last(self, connection: _Connection, data: bytes) -> None:
        """Send the one reply of this connection, then close it once sent."""
        connection.stage = _REPLY
        connection.received = bytearray()
        connection.unsent += data
        connection.deadline = time.monotonic() + self.request_timeout
        self._flush(connection)

    def _flush(self, connection: _Connection) -> None:
        if self._send_unsent(connection):
            if connection.stage == _REPLY:
                self._close(connection)
            else:                           # the go-ahead is out: now the body
                self._take_body(connection)
        elif not connection.closed:
            self._watch(connection, selectors.EVENT_WRITE)

    def _count_unauthenticated(self, host: str, change: int) -> None:
        left = self._unauthenticated.pop(host, 0) + change
        if left > 0:
            self._unauthenticated[host] = left

    def _forget(self, connection: _Connection) -> None:   # type: ignore[override]
        if connection.uid is None:
            self._count_unauthenticated(connection.host, -1)
        else:
            self._release(connection.uid)
        try:
            connection.sock.shutdown(socket.SHUT_WR)   # the reply is delivered before the close
        except OSError:
            pass

    def _release(self, uid: int) -> None:
        with self._lock:
            left = self._per_uid.pop(uid, 1) - 1
            if left:
                self._per_uid[uid] = left

    # ------------------------------------------------------------------ calls (workers)
    def _user_rate(self, uid: int) -> _TokenBucket:
        """``uid``'s bucket (under _lock); buckets back to full are forgotten once there are many."""
        bucket = self._user_rates.get(uid)
        if bucket is None:
            if len(self._user_rates) >= 1024:
                now = time.monotonic()
                self._user_rates = {u: b for u, b in self._user_rates.items() if not b.full(now)}
            bucket = self._user_rates[uid] = _TokenBucket(self.max_rate_per_user)
        return bucket

    def _signed(self, connection: _Connection, reply: dict) -> bytes:
        """The reply frame, with the daemon's credential for this request's header and this body."""
        body = encode(reply)
        try:
            credential = munge.encode(reply_digest(connection.header, body), self.munge_socket)
        except munge.MungeError as error:   # the CLI will not believe it: it says so
            logger.error("remote listener: cannot sign a reply: %s", error)
            credential = ""
        return frame(body, credential)

    def _authenticate(self, connection: _Connection, credential: str):
        """munged's word on ``credential``: ("authenticated", connection, (uid, payload)), or a refusal."""
        host = connection.host
        if credential == UNSIGNED:
            self.refused("unauthenticated", host, "no credential")
            return "reply", connection, self._signed(connection, _unauthenticated(
                "none sent (the remote listener learns who you are from a MUNGE credential; `hpcpredict predict` "
                "makes one with this host's munged)"))
        try:
            vouched = munge.decode(credential, self.munge_socket)
        except munge.MungeError as error:
            if error.code == munge.EMUNGE_SOCKET:   # our munged, not the caller, is at fault
                logger.error("remote listener: munged unreachable: %s", error)
                self.service.faults.set("munge", "decode remote credentials", str(error))
                return "reply", connection, self._signed(connection, {
                    "ok": False, "code": "UNAVAILABLE",
                    "error": "the daemon's munged does not answer, so no caller can be identified"})
            self.refused("unauthenticated", host, str(error))
            advice = _ADVICE.get(error.code, "not a MUNGE credential of this site")
            return "reply", connection, self._signed(connection, _unauthenticated(f"{error} ({advice})"))
        self.service.faults.clear("munge", "decode remote credentials")
        if not vouched.payload.startswith(_REQUEST_PREFIX) or len(vouched.payload) != len(_REQUEST_PREFIX) + 64:
            self.refused("unauthenticated", host, f"uid {vouched.uid}: a credential not made for a request")
            return "reply", connection, self._signed(connection, _unauthenticated(
                "it was not made for an hpcpredict request"))
        seen = self.seen.add(credential, vouched.expires)
        if seen is False:
            self.refused("replayed", host, f"uid {vouched.uid}: a credential accepted before")
            return "reply", connection, self._signed(connection, _unauthenticated(
                f"Replayed credential (the daemon accepted it before) ({_ADVICE[munge.EMUNGE_CRED_REPLAYED]})"))
        if seen is None:    # every credential remembered is live: none is forgotten early
            self.refused("busy", host, f"{len(self.seen)} credentials remembered until they expire")
            return "reply", connection, self._signed(connection, BUSY_REPLY)
        with self._lock:
            connections = self._per_uid.get(vouched.uid, 0)
            over = (connections >= self.max_connections_per_user
                    or not self._user_rate(vouched.uid).take(time.monotonic()))
            if not over:
                self._per_uid[vouched.uid] = connections + 1
        if over:
            self.refused("user_busy", host, f"uid {vouched.uid}: over its connections or rate")
            return "reply", connection, self._signed(connection, BUSY_REPLY)
        return "authenticated", connection, (vouched.uid, vouched.payload, self._signed(connection, GO_AHEAD))

    def _call(self, connection: _Connection, body: bytes):
        """The authenticated body -> ("reply", connection, the signed reply frame)."""
        assert connection.uid is not None, "a body is read only once its credential is checked"
        if request_digest(body) != connection.payload:
            self.refused("unauthenticated", connection.host, f"uid {connection.uid}: credential for another request")
            return "reply", connection, self._signed(connection, _unauthenticated("it was made for another request"))
        return "reply", connection, self._signed(connection, self.handle_body(body, connection.uid, connection.host))

    def handle_body(self, body: bytes, uid: int, host: str = "?") -> dict:
        """An authenticated request body from ``uid`` -> the reply object (never raises for bad input)."""
        try:
            method, request_body = line_json.read_envelope(body, _LISTED)
            if method not in REMOTE_METHODS:
                return {"ok": False, "code": "PERMISSION_DENIED",
                        "error": f"{method} is not served remotely: admin and history-writing calls are made on "
                                 f"the daemon's host, on its local socket"}
            request = line_json.parse_request(method, request_body, self.service.request_bounds, privileged=False)
        except Refused as refused:
            if refused.reason == "limits":
                self.refused("limits", host, f"uid {uid}: {refused.reply['error']}")
            return refused.reply
        return line_json.call(self.service, method, request, uid, "remote", f" from {host} (uid {uid})")


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
