"""The daemon's gRPC server on the C++ front end (``daemon/native/grpcfront.cpp``).

gRPC Python's thread-pool server hands the interpreter lock between its polling thread and a
worker three to four times per unary call; on this project's 2-core reference machine that,
not the Predict handler, capped the daemon near 1,500 Predicts/s (benchmarks/README.md,
issue 9). The front end keeps all gRPC work (HTTP/2, accept, read, write, health checks,
refusing calls past ``max_concurrent``) in C++ threads that never take the lock. ``workers``
Python dispatcher threads take requests in batches, run the same servicer methods as the
gRPC Python server would, and hand back serialized answers.

``NativeServer`` offers the part of ``grpc.Server`` the daemon uses (ports, start, stop,
wait) plus ``set_serving`` for the health checks answered in C++ (``Check`` only, see
grpcfront.cpp). Handlers see the servicer's
:class:`~hpcpredict.daemon.servicer.CallContext` (``peer()``, ``abort()``), as hook-socket calls do.

>>> server = NativeServer(workers=1, max_concurrent=4, max_message_bytes=1 << 20)
>>> server.add_unary("/demo.Echo/Say", lambda request, context: request, bytes, bytes)
>>> sorted(server.methods)
['/demo.Echo/Say']
"""
from __future__ import annotations

import logging
import threading

import grpc

from hpcpredict.daemon import _grpcfront
from hpcpredict.daemon.servicer import AbortCall, CallContext

logger = logging.getLogger(__name__)

OK = 0
_UNKNOWN = grpc.StatusCode.UNKNOWN.value[0]
_UNIMPLEMENTED = grpc.StatusCode.UNIMPLEMENTED.value[0]
_INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]
# A batch is what one dispatcher takes with one lock acquisition. Small, so that a slow call (an
# outcome's fsync) holds few others: once the active dispatcher has answered nothing for
# STUCK_S, another one takes the next batch (daemon/native/grpcfront.cpp, NextBatch).
BATCH = 4
STUCK_S = 0.002


class _Handler:
    __slots__ = ("behavior", "deserialize", "serialize")

    def __init__(self, behavior, deserialize, serialize):
        self.behavior, self.deserialize, self.serialize = behavior, deserialize, serialize


class _StoppedEvent:
    """``stop()``'s answer: ``wait()`` returns once the server has stopped (as grpc.Server's)."""

    def __init__(self, thread: threading.Thread):
        self._thread = thread

    def wait(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


class NativeServer:
    def __init__(self, *, workers: int, max_concurrent: int, max_message_bytes: int, background_io: bool = True):
        self.workers = max(1, int(workers))
        self.max_concurrent = int(max_concurrent)
        self.max_message_bytes = int(max_message_bytes)
        self.background_io = bool(background_io)  # the C++ thread at SCHED_IDLE: Poll() in grpcfront.cpp
        self.methods: dict[str, _Handler] = {}
        self.streaming: set[str] = set()
        self._ports: list[tuple[str, bytes, bytes]] = []
        self._front = None
        self._dispatchers: list[threading.Thread] = []
        self._stopped = threading.Event()
        self._stop_thread: threading.Thread | None = None

    # -- building --
    def add_unary(self, method: str, behavior, deserialize, serialize) -> None:
        """``behavior(request, context) -> response`` answers ``method`` ("/package.Service/Method")."""
        self.methods[method] = _Handler(behavior, deserialize, serialize)

    def add_stream(self, method: str, behavior, deserialize, serialize) -> None:
        """A bidirectional stream answered one response per request message, in order."""
        self.add_unary(method, behavior, deserialize, serialize)
        self.streaming.add(method)

    def add_insecure_port(self, address: str) -> None:
        self._ports.append((address, b"", b""))

    def add_secure_port(self, address: str, key_pem: bytes, cert_pem: bytes) -> int:
        """Returns a handle for :meth:`bound_port` (the port is known once started)."""
        self._ports.append((address, key_pem, cert_pem))
        return len(self._ports) - 1

    def bound_port(self, handle: int) -> int:
        return self._front.bound_port(handle) if self._front is not None else 0

    # -- running --
    def start(self) -> None:
        front = _grpcfront.Front(self.max_concurrent, self.max_message_bytes, streaming_methods=self.streaming,
                                 stuck_s=STUCK_S, background_io=self.background_io)
        for address, key, cert in self._ports:
            if key:
                front.add_secure_port(address, key.decode(), cert.decode())
            else:
                front.add_insecure_port(address)
        try:
            front.start()
        except RuntimeError as error:
            raise OSError(f"gRPC front end: {error} ({', '.join(a for a, _, _ in self._ports)})") from error
        self._front = front
        for number in range(self.workers):
            thread = threading.Thread(target=self._dispatch, name=f"rpc-{number}", daemon=True)
            thread.start()
            self._dispatchers.append(thread)

    def set_serving(self, service: str, serving: bool) -> None:
        if self._front is not None:
            self._front.set_serving(service, serving)

    def stats(self) -> dict:
        return self._front.stats() if self._front is not None else {}

    def stop(self, grace: float | None) -> _StoppedEvent:
        if self._stop_thread is None:
            self._stop_thread = threading.Thread(target=self._stop, args=(grace or 0.0,), name="rpc-stop")
            self._stop_thread.start()
        return _StoppedEvent(self._stop_thread)

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._stopped.wait(timeout)

    def _stop(self, grace: float) -> None:
        if self._front is not None:
            self._front.stop(grace)
            for thread in self._dispatchers:
                thread.join()
        self._stopped.set()

    def _dispatch(self) -> None:
        next_batch, reply = self._front.next_batch, self._front.reply
        while True:
            batch = next_batch(BATCH, 0.5)
            if batch is None:
                return
            for call_id, method, payload, peer in batch:
                try:
                    status, details, answer = self._answer(method, payload, peer)
                    reply(call_id, status, details, answer)
                except Exception:  # e.g. an encoder that returned no bytes: the caller still gets an answer
                    logger.exception("%s: cannot answer", method)
                    reply(call_id, _UNKNOWN, f"{method}: internal error", b"")

    def _answer(self, method: str, payload: bytes, peer: str) -> tuple[int, str, bytes]:
        handler = self.methods.get(method)
        if handler is None:
            return _UNIMPLEMENTED, f"unknown method {method}", b""
        try:
            request = handler.deserialize(payload)
        except Exception:
            return _INVALID_ARGUMENT, f"{method}: request does not decode", b""
        try:
            return OK, "", handler.serialize(handler.behavior(request, CallContext(peer)))
        except AbortCall as aborted:
            return aborted.code.value[0], aborted.details, b""
        except Exception as error:  # a bug must cost one call, never the dispatcher
            logger.exception("%s failed", method)
            return _UNKNOWN, f"{method}: {type(error).__name__}", b""
