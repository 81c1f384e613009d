"""The agents' metrics: the names in slurm/agent/contract.py, kept here and exposed by prometheus_client.

One custom collector holds every series (prometheus_client docs "Custom Collectors"): it yields a
CounterMetricFamily or GaugeMetricFamily per contract metric on each scrape. Why not prometheus_client's
Counter and Gauge: a Counter also exposes `<name>_created` series, which are not in the contract (dashboards and
alert rules may use only the contract's names, tests/observability), and a Gauge's labelled children cannot be
swapped as one set, which `replace` needs (a scrape sees the old set or the new one, never half). The
contract's counter names already end in `_total`; CounterMetricFamily takes them as they are and the text format
writes the family as `<name>` with that one `_total` (prometheus_client/metrics_core.py, exposition.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.core import Metric as Family
from prometheus_client.registry import Collector

from slurm.agent.contract import ALL, Metric

LabelValues = tuple[str, ...]


class Registry(Collector):
    """The series of the contract's metrics, in a CollectorRegistry of their own (`self.registry`)."""

    def __init__(self, metrics: Iterable[Metric] = ALL) -> None:
        self._metrics = {m.name: m for m in metrics}
        self._values: dict[str, dict[LabelValues, float]] = {name: {} for name in self._metrics}
        self._lock = threading.Lock()
        self.registry = CollectorRegistry()
        self.registry.register(self)

    def _key(self, metric: Metric, labels: Mapping[str, str]) -> LabelValues:
        if metric.name not in self._metrics:
            raise KeyError(f"{metric.name} is not registered")
        if set(labels) != set(metric.labels):
            raise ValueError(f"{metric.name} takes labels {metric.labels}, got {sorted(labels)}")
        return tuple(str(labels[name]) for name in metric.labels)

    def inc(self, metric: Metric, labels: Mapping[str, str] | None = None, by: float = 1.0) -> None:
        if by < 0 and metric.kind == "counter":
            raise ValueError(f"{metric.name} is a counter: it only goes up")
        key = self._key(metric, labels or {})
        with self._lock:
            series = self._values[metric.name]
            series[key] = series.get(key, 0.0) + by

    def set(self, metric: Metric, labels: Mapping[str, str] | None = None, value: float = 0.0) -> None:
        _gauge(metric)
        key = self._key(metric, labels or {})
        with self._lock:
            self._values[metric.name][key] = float(value)

    def replace(self, metric: Metric, series: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """A gauge's whole set of series at once: a scrape sees the old set or the new one, never half."""
        _gauge(metric)
        values = {self._key(metric, labels): float(value) for labels, value in series}
        with self._lock:
            self._values[metric.name] = values

    def clear(self, metric: Metric) -> None:
        """Drop a gauge's series (before setting this pass's values, so gone label sets disappear)."""
        with self._lock:
            self._values[metric.name].clear()

    def value(self, metric: Metric, labels: Mapping[str, str] | None = None) -> float:
        key = self._key(metric, labels or {})
        with self._lock:
            return self._values[metric.name].get(key, 0.0)

    def collect(self) -> Iterator[Family]:
        with self._lock:  # one snapshot of every series per scrape
            snapshot = {name: sorted(series.items()) for name, series in self._values.items()}
        for name, metric in self._metrics.items():
            kind = CounterMetricFamily if metric.kind == "counter" else GaugeMetricFamily
            family = kind(name, metric.help, labels=metric.labels)
            for key, value in snapshot[name]:
                family.add_metric(list(key), value)
            yield family

    def render(self) -> str:
        """The text exposition a scrape gets."""
        return generate_latest(self.registry).decode()


def _gauge(metric: Metric) -> None:
    if metric.kind != "gauge":
        raise ValueError(f"{metric.name} is a {metric.kind}: only gauges are set")


def serve(registry: Registry, host: str = "0.0.0.0", port: int = 9090) -> tuple[WSGIServer, threading.Thread]:
    """Serve the registry over HTTP on a daemon thread (prometheus_client answers GET on any path, /metrics
    included); returns the server (call shutdown() and server_close() to stop it) and its thread."""
    return start_http_server(port, addr=host, registry=registry.registry)
