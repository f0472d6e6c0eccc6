"""Prometheus metrics on an explicit registry (no import-time globals).

Counters and the latency histogram are counted where calls are answered (the service). State
(faults, models served, predictions waiting in the journal) is not copied into gauges: a
collector reads it from where it lives when Prometheus scrapes.

The endpoint is :class:`MetricsServer`, not prometheus_client's ``start_http_server``: that one
takes a thread and a descriptor for every TCP connection and never times a silent one out, so
any local user could hold thousands of each (and, under a task limit, leave the daemon unable
to start a thread anywhere). Ours is one thread, at most ``max_connections`` connections, each
cut off ``timeout`` seconds after it was accepted; the text is prometheus_client's own encoder.
A connection that holds a place without asking (no whole request yet) gives it up to a new
one when all are taken: Prometheus sends its request with its connect, so idle connections
(any local user may open them) never keep a scrape out.
"""
from __future__ import annotations

import logging
import selectors
import socket
import time
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from .connections import Connection, SelectorServer, listening_socket
from ..errors import HpcPredictError

if TYPE_CHECKING:
    from ..engine import PredictionEngine
    from ..faults import FaultBoard
    from ..store import Store

logger = logging.getLogger(__name__)

# Fine below 2 ms (the latency goal), so p50/p99 can be read from the histogram to ~10 %.
LATENCY_BUCKETS = (5e-5, 1e-4, 1.5e-4, 2e-4, 2.5e-4, 3e-4, 4e-4, 5e-4, 6e-4, 8e-4, 1e-3, 1.25e-3, 1.5e-3,
                   2e-3, 2.5e-3, 3e-3, 4e-3, 5e-3, 7.5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.5, 2.0)


# Rolling accuracy gauges: (value key of Store.partition_accuracy, metric name, help).
ACCURACY_GAUGES = (
    ("accuracy", "hpcpredict_partition_accuracy",
     "Mean min(predicted, actual)/max(predicted, actual) runtime of recent outcomes, per partition"),
    ("under_rate", "hpcpredict_partition_under_prediction_ratio",
     "Share of recent outcomes that ran longer than predicted, per partition"),
    ("kill_rate", "hpcpredict_partition_kill_ratio",
     "Share of recent outcomes killed at their time limit (TIMEOUT), per partition"),
    ("n", "hpcpredict_partition_scored_jobs", "Recent outcomes with a prediction these gauges are computed on"),
)
ACCURACY_WINDOW_JOBS = 200          # last outcomes per partition
ACCURACY_WINDOW_S = 7 * 86400.0     # ... that ended within this long


class StateCollector:
    """Gauges read at scrape time from the fault board, the engine and the store."""

    def __init__(self, faults: FaultBoard, engine: PredictionEngine, store: Store):
        self.faults, self.engine, self.store = faults, engine, store

    def describe(self):
        return []   # nothing to check at registration; collect() is only called on a scrape

    def collect(self):
        faults = GaugeMetricFamily("hpcpredict_fault", "1 while a fault is active (set by the failing "
                                   "operation, cleared when that operation succeeds)", labels=["component", "operation"])
        for component, operation, _message in self.faults.items():
            faults.add_metric([component, operation], 1)
        yield faults
        models = GaugeMetricFamily("hpcpredict_model_info", "Models being served (value 1)",
                                   labels=["kind", "key", "version"])
        for artifact in self.engine.models.artifacts:
            models.add_metric([artifact.kind, artifact.key, artifact.version], 1)
        yield models
        yield GaugeMetricFamily("hpcpredict_prediction_journal_rows",
                                "Predictions answered and journaled, not yet committed to the store",
                                value=self.store.pending_predictions())
        yield from self._accuracy()

    def _accuracy(self):
        """Rolling accuracy per partition: one aggregate query over each partition's last
        ACCURACY_WINDOW_JOBS outcomes of the last ACCURACY_WINDOW_S (indexed by end time). A
        store that cannot answer leaves the gauges out of this scrape (its fault is reported)."""
        lookup = getattr(self.store, "partition_accuracy", None)
        if lookup is None:
            return
        try:
            by_partition = lookup(ACCURACY_WINDOW_JOBS, since=time.time() - ACCURACY_WINDOW_S)
        except HpcPredictError:
            return
        families = {key: GaugeMetricFamily(name, text, labels=["partition"])
                    for key, name, text in ACCURACY_GAUGES}
        for partition, values in sorted(by_partition.items()):
            for key, family in families.items():
                family.add_metric([partition], values[key])
        yield from families.values()


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.requests = Counter("hpcpredict_requests", "Calls answered, by method and status code",
                                ["method", "code"], registry=self.registry)
        self.latency = Histogram("hpcpredict_request_seconds", "Server-side call latency", ["method"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.fallbacks = Counter("hpcpredict_fallbacks", "Estimates answered by a fallback (no trained model)",
                                 registry=self.registry)
        self.outcomes = Counter("hpcpredict_outcomes", "Outcomes stored", ["state"], registry=self.registry)
        self.predictions_not_kept = Counter(
            "hpcpredict_predictions_not_kept",
            "Predictions answered but kept with a compact request, without it or not at all (a user's or the writers' budget, the store's cap)",
            registry=self.registry)
        self.rejected = Counter("hpcpredict_overload_rejections",
                                "Hook-socket calls refused as busy (gRPC refuses past maximum_concurrent_rpcs itself)",
                                registry=self.registry)
        self.remote_refusals = Counter(
            "hpcpredict_remote_refusals",
            "Remote-listener requests refused, by reason (header, connections, idle, timeout, busy, "
            "unauthenticated, replayed, user_busy, limits)", ["reason"], registry=self.registry)
        self.local_socket_errors = Counter(
            "hpcpredict_local_socket_errors",
            "Exceptions caught on the local socket (each logged; the connection is closed, the loop goes on)",
            registry=self.registry)

    def watch(self, faults: FaultBoard, engine: PredictionEngine, store: Store) -> None:
        """Report the daemon's state (see :class:`StateCollector`) on every scrape."""
        self.registry.register(StateCollector(faults, engine, store))


def start_metrics_server(address: str, metrics: Metrics, **options) -> tuple["MetricsServer", int]:
    """Serve /metrics on host:port (port 0 = any free one); returns (server, bound port)."""
    server = MetricsServer(address, metrics.registry, **options).start()
    assert server.port is not None, "start() bound it"
    return server, server.port


class MetricsServer(SelectorServer):
    """GET /metrics over HTTP, one request per connection, from one thread with a selectors loop.

    Past ``max_connections`` open connections a new one is closed at once; a connection is cut
    off ``timeout`` seconds after it was accepted, whatever it did (a scrape of a local
    Prometheus takes milliseconds). Rendering the text (the collectors' store queries) runs on
    this thread: a slow scrape delays the next scrape, never a prediction.
    """

    name = "metrics endpoint"
    thread_name = "metrics"
    _MAX_REQUEST_BYTES = 8192

    def __init__(self, address: str, registry, *, max_connections: int = 16, timeout: float = 5.0):
        super().__init__()
        host, _, port = address.rpartition(":")
        self.host, self.requested_port = host or "127.0.0.1", int(port)
        self.registry = registry
        self.max_connections = max_connections
        self.timeout = timeout
        self.port: int | None = None
        self.refused = 0

    def start(self) -> "MetricsServer":
        family = socket.AF_INET6 if ":" in self.host.strip("[]") else socket.AF_INET
        listener = listening_socket(family, (self.host.strip("[]"), self.requested_port), 64)
        self.port = listener.getsockname()[1]
        self._serve(listener)
        return self

    def shutdown(self) -> None:
        self._stop_loop(None)

    def _loop_failed(self, error: Exception, failures: int) -> bool:
        """Logged; after many in a row, give up."""
        logger.exception("metrics endpoint: loop error %d in a row", failures)
        if failures >= 10:
            logger.critical("metrics endpoint stopped after %d loop errors in a row", failures)
            return False
        return True

    def _turn(self) -> bool:
        if self._stop_at is not None:
            return True
        self._dispatch(self._selector.select(0.5), time.monotonic())
        now = time.monotonic()
        for connection in [c for c in self._connections.values() if c.deadline <= now]:
            self._close(connection)
        return False

    def _accept(self, now: float) -> None:
        self._accept_connections(now, 64)

    def _accept_failed(self, error: OSError, now: float) -> None:
        logger.warning("metrics endpoint cannot accept: %s", error)   # out of descriptors or memory now: the backlog waits

    def _admit(self, sock: socket.socket, peer, now: float) -> None:
        if len(self._connections) >= self.max_connections and not self._make_room():
            self.refused += 1
            sock.close()
            return
        sock.setblocking(False)
        connection = self._connections[sock.fileno()] = Connection(sock, now + self.timeout)
        self._watch(connection, selectors.EVENT_READ)

    def _make_room(self) -> bool:
        """Close the oldest connection that has not asked anything yet; False if none is idle."""
        for connection in self._connections.values():   # in the order they were accepted
            if not connection.unsent:
                self.refused += 1
                self._close(connection)
                return True
        return False

    def _on_event(self, connection: Connection, mask: int) -> None:
        try:
            if mask & selectors.EVENT_WRITE:
                self._flush(connection)
            elif self._receive(connection, 4096):
                self._respond(connection)
        except Exception:
            logger.exception("metrics endpoint: error on a connection; closing it")
            self._close(connection)

    def _respond(self, connection: Connection) -> None:
        head, found, _ = bytes(connection.received).partition(b"\r\n\r\n")
        if not found:
            if len(connection.received) > self._MAX_REQUEST_BYTES:
                self._answer(connection, 431, b"request too large\n", "text/plain")
            return
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split()
        headers = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        accept = next((v.strip() for k, v in headers.items() if k.strip().lower() == "accept"), "")
        if len(parts) < 2 or parts[0] not in ("GET", "HEAD"):
            self._answer(connection, 405, b"only GET\n", "text/plain")
        elif parts[1].split("?")[0] not in ("/", "/metrics"):
            self._answer(connection, 404, b"not found: try /metrics\n", "text/plain")
        else:
            encoder, content_type = choose_encoder(accept)
            self._answer(connection, 200, b"" if parts[0] == "HEAD" else encoder(self.registry), content_type)

    def _answer(self, connection: Connection, status: int, body: bytes, content_type: str) -> None:
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}[status]
        connection.unsent += (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
                              f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        connection.unsent += body
        self._watch(connection, selectors.EVENT_WRITE)
        self._flush(connection)

    def _flush(self, connection: Connection) -> None:
        if self._send_unsent(connection):
            self._close(connection)
