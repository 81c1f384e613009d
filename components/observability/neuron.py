"""neuron-monitor on the Trainium partitions' nodes: AWS's DaemonSet (aws-neuron/aws-neuron-sdk v2.32.0
src/k8/k8s-neuron-monitor-daemonset.yml, the one deploy/infrastructure/monitoring.rst applies) with our node
selection, in the monitoring namespace, plus the Service and ServiceMonitor Prometheus scrapes it by. The manifest
is AWS's documented install; the aws-neuron/neuron-helm-charts snapshot read (chart 1.0.0) has the device plugin,
scheduler and node problem detector only (whether 1.9.0, pinned in components/compute/device_plugins.py, adds a monitor
was not checked)."""

from __future__ import annotations

from typing import Any

from components.config.cluster import ClusterConfig
from components.kubernetes import namespaces
from components.observability.nodes import accelerator_affinity, accelerator_tolerations

NAME = "neuron-monitor"
IMAGE = "public.ecr.aws/neuron/neuron-monitor:1.3.0"  # the upstream manifest's image
PORT = 8000
LABELS = {"app": NAME}


def daemonset(config: ClusterConfig) -> dict[str, Any]:
    container = {
        "name": NAME, "image": IMAGE, "ports": [{"name": "metrics", "containerPort": PORT}],
        "command": ["/opt/bin/entrypoint.sh"],
        "args": ["--port", str(PORT), "--neuron-monitor-config", "/opt/aws/neuron/bin/neuron-monitor.conf"],
        "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "256m", "memory": "128Mi"}},
        "env": [{"name": "GOMEMLIMIT", "value": "160MiB"}],
        "securityContext": {"privileged": True},  # upstream's: it reads the Neuron devices
    }
    return {"metadata": {"name": NAME, "namespace": namespaces.MONITORING, "labels": LABELS},
            "spec": {"selector": {"matchLabels": LABELS}, "template": {
                "metadata": {"labels": LABELS},
                "spec": {"affinity": accelerator_affinity("neuron"),
                         "tolerations": accelerator_tolerations(config, "neuron"), "containers": [container]}}}}


def service() -> dict[str, Any]:
    return {"metadata": {"name": NAME, "namespace": namespaces.MONITORING, "labels": LABELS},
            "spec": {"selector": LABELS, "ports": [{"name": "metrics", "port": PORT, "targetPort": "metrics"}]}}


def service_monitor() -> dict[str, Any]:
    return {"metadata": {"name": NAME, "namespace": namespaces.MONITORING, "labels": LABELS},
            "spec": {"selector": {"matchLabels": LABELS}, "endpoints": [{"port": "metrics", "interval": "30s"}]}}
