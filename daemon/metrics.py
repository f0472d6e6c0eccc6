"""Prometheus metrics on an explicit registry (no import-time globals).

Counters and the latency histogram are counted where calls are answered (the service). State
(faults, models served, predictions waiting in the journal) is not copied into gauges: a
collector reads it from where it lives when Prometheus scrapes.
"""
from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

from .errors import HpcPredictError

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

    def __init__(self, faults, engine, store):
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
            "Predictions answered but kept without their request or not at all (a user's budget, the store's cap)",
            registry=self.registry)
        self.rejected = Counter("hpcpredict_overload_rejections",
                                "Hook-socket calls refused as busy (gRPC refuses past maximum_concurrent_rpcs itself)",
                                registry=self.registry)

    def watch(self, faults, engine, store) -> None:
        """Report the daemon's state (see :class:`StateCollector`) on every scrape."""
        self.registry.register(StateCollector(faults, engine, store))


def start_metrics_server(address: str, metrics: Metrics):
    """Serve /metrics on host:port (port 0 = any free one); returns (server, bound port)."""
    host, _, port = address.rpartition(":")
    server, _thread = start_http_server(int(port), addr=host or "127.0.0.1", registry=metrics.registry)
    return server, server.server_address[1]
