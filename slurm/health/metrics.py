"""A small metrics registry for the names in slurm/agent/contract.py, rendered in the Prometheus text exposition
format 0.0.4 (HELP / TYPE lines, `name{label="value"} number`), and the /metrics endpoint serving it.

Standard library only: this runs in the cluster.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from slurm.agent.contract import ALL, Metric

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LabelValues = tuple[str, ...]


def _escape_label(value: str) -> str:
    # Format 0.0.4: in label values backslash, double quote and line feed are escaped.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    # Format 0.0.4: in HELP text only backslash and line feed are escaped.
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Registry:
    def __init__(self, metrics: Iterable[Metric] = ALL) -> None:
        self._metrics = {m.name: m for m in metrics}
        self._values: dict[str, dict[LabelValues, float]] = {name: {} for name in self._metrics}
        self._lock = threading.Lock()

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
        if metric.kind != "gauge":
            raise ValueError(f"{metric.name} is a {metric.kind}: only gauges are set")
        key = self._key(metric, labels or {})
        with self._lock:
            self._values[metric.name][key] = float(value)

    def replace(self, metric: Metric, series: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """A gauge's whole set of series at once: a scrape sees the old set or the new one, never half."""
        if metric.kind != "gauge":
            raise ValueError(f"{metric.name} is a {metric.kind}: only gauges are set")
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

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, metric in self._metrics.items():
                lines.append(f"# HELP {name} {_escape_help(metric.help)}")
                lines.append(f"# TYPE {name} {metric.kind}")
                for key, value in sorted(self._values[name].items()):
                    labels = ",".join(f'{label}="{_escape_label(v)}"' for label, v in zip(metric.labels, key,
                                                                                        strict=True))
                    lines.append(f"{name}{{{labels}}} {_number(value)}" if labels else f"{name} {_number(value)}")
        return "\n".join(lines) + "\n"


def serve(registry: Registry, host: str = "0.0.0.0", port: int = 9090) -> ThreadingHTTPServer:
    """Start serving GET /metrics on a daemon thread; the caller shuts the returned server down."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = registry.render().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # scrapes every 30 s: not worth a log line
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
