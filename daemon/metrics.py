"""Prometheus metrics on an explicit registry (no import-time globals)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Fine below 2 ms (the latency goal), so p50/p99 can be read from the histogram to ~10 %.
LATENCY_BUCKETS = (5e-5, 1e-4, 1.5e-4, 2e-4, 2.5e-4, 3e-4, 4e-4, 5e-4, 6e-4, 8e-4, 1e-3, 1.25e-3, 1.5e-3,
                   2e-3, 2.5e-3, 3e-3, 4e-3, 5e-3, 7.5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.5, 2.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.requests = Counter("hpcpredict_requests", "RPCs answered, by method and status code",
                                ["method", "code"], registry=self.registry)
        self.latency = Histogram("hpcpredict_request_seconds", "Server-side RPC latency", ["method"],
                                 buckets=LATENCY_BUCKETS,
                                 registry=self.registry)
        self.fallbacks = Counter("hpcpredict_fallbacks", "Estimates answered by a fallback (no trained model)",
                                 registry=self.registry)
        self.outcomes = Counter("hpcpredict_outcomes", "Outcomes stored", ["state"], registry=self.registry)
        self.model_info = Gauge("hpcpredict_model_info", "Models being served (value 1)",
                                ["kind", "key", "version"], registry=self.registry)
        self.faults = Gauge("hpcpredict_fault", "1 while a fault is active", ["component"], registry=self.registry)
        # Read at scrape time (no cost on Predict): grows while the store refuses writes.
        self.journal_pending = Gauge("hpcpredict_prediction_journal_rows",
                                     "Predictions answered and journaled, not yet committed to the store",
                                     registry=self.registry)
        self.rejected = Counter("hpcpredict_overload_rejections",
                                "Hook-socket calls refused as busy (gRPC refuses past maximum_concurrent_rpcs itself)",
                                registry=self.registry)

    def watch_grpc_front(self, stats) -> None:
        """Gauges read from the native gRPC front end's counters at scrape time (``stats()`` -> dict)."""
        Gauge("hpcpredict_grpc_calls_in_flight",
              "gRPC calls accepted and not yet answered (refused past daemon.max_concurrent)",
              registry=self.registry).set_function(lambda: stats().get("in_flight", 0))
        Gauge("hpcpredict_grpc_refused_calls",
              "gRPC calls refused RESOURCE_EXHAUSTED at daemon.max_concurrent since start",
              registry=self.registry).set_function(lambda: stats().get("refused", 0))

    def set_models(self, artifacts) -> None:
        self.model_info.clear()
        for artifact in artifacts:
            self.model_info.labels(artifact.kind, artifact.key, artifact.version).set(1)

    def set_faults(self, faults: dict) -> None:
        self.faults.clear()
        for component in faults:
            self.faults.labels(component).set(1)


def start_metrics_server(address: str, metrics: Metrics):
    """Serve /metrics on host:port (port 0 = any free one); returns (server, bound port)."""
    from prometheus_client import start_http_server

    host, _, port = address.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=metrics.registry)
    return server, server.server_address[1]
