"""The plan's KEDA ScaledObjects evaluated as KEDA and the HPA would, against a real Prometheus that scrapes the
twin's slurmctld (Slurm 25.11's openmetrics, at the Controller's ServiceMonitor paths) and the plan's PodMonitor
targets (the lifecycle controller's demand metric).

KEDA's prometheus scaler sends the trigger's `query` to Prometheus's HTTP API and takes the single sample it
returns (kedacore/keda v2.20 pkg/scalers/prometheus_scaler.go ExecutePromQuery: an empty result is 0, more
than one element is an error). For a `metricType: AverageValue` trigger the HPA sets
replicas = ceil(value / threshold) (kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale,
"Algorithm details", with the external metric's target average value), bounded by the ScaledObject's
minReplicaCount and maxReplicaCount.
"""

from __future__ import annotations

import json
import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scripts.twin.errors import TwinError

PORT = 9090
# The twin scrapes every few seconds so a test sees a change quickly; the plan's interval (30 s) only delays it.
SCRAPE_SECONDS = 3


@dataclass(frozen=True)
class Target:
    job: str
    address: str  # host:port
    path: str


def prometheus_config(targets: list[Target]) -> str:
    """prometheus.yml for static targets (JSON is YAML)."""
    return json.dumps({
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{SCRAPE_SECONDS}s"},
        "scrape_configs": [{"job_name": t.job, "metrics_path": t.path, "static_configs": [{"targets": [t.address]}]}
                           for t in targets],
    }, indent=1)


def query_url(promql: str) -> str:
    return f"http://127.0.0.1:{PORT}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"


def sample(response: str, promql: str) -> float:
    """The value KEDA takes from an instant query's answer."""
    data = json.loads(response)
    if data.get("status") != "success":
        raise TwinError(f"Prometheus refused {promql!r}: {data.get('error')}")
    result = data["data"]["result"]
    if data["data"]["resultType"] == "scalar":
        return float(result[1])
    if not result:
        return 0.0
    if len(result) > 1:
        raise TwinError(f"{promql!r} returned {len(result)} series; KEDA's prometheus scaler takes exactly one")
    return float(result[0]["value"][1])


def trigger(scaled_object: Mapping[str, Any]) -> Mapping[str, Any]:
    (found,) = [t for t in scaled_object["spec"]["triggers"] if t["type"] == "prometheus"]
    return found


def desired_replicas(scaled_object: Mapping[str, Any], value: float) -> int:
    spec, prometheus = scaled_object["spec"], trigger(scaled_object)
    if prometheus.get("metricType", "AverageValue") != "AverageValue":
        raise TwinError(f"ScaledObject {scaled_object['metadata']['name']}: only AverageValue triggers are twinned")
    wanted = math.ceil(value / float(prometheus["metadata"]["threshold"]))
    return max(int(spec.get("minReplicaCount", 0)), min(int(spec.get("maxReplicaCount", 100)), wanted))
