"""Grafana, alert rules and the accelerator exporters for the Slurm nodes.

`kube_prometheus_values(config, grafana_role_arn)` goes into the kube-prometheus-stack release
(components/lifecycle/autoscaling.py): Grafana on the system nodes with a gp3 volume, its admin login from
GRAFANA_ADMIN_SECRET, the dashboards of components/observability/dashboards from ConfigMaps, a CloudWatch data source
read
through the IRSA role of components/observability/cloudwatch.py, and the rules of components/observability/rules.py.
`Observability` then creates that Secret, the dashboard ConfigMaps (the FSx dashboard defaulting to the stack's
file system), dcgm-exporter (GPU partitions) and neuron-monitor (Trainium partitions).

Alertmanager stays off: with no receiver it would deliver nothing, and firing alerts are already on
Prometheus's /alerts page. Turn it on together with a receiver (Slack, PagerDuty, SNS).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.config.cluster import ClusterConfig
from components.kubernetes import namespaces
from components.kubernetes.charts import release
from components.kubernetes.namespaces import Namespaces
from components.observability.cloudwatch import grafana_values
from components.observability.dcgm import DCGM_EXPORTER, DCGM_JOB_MAP_DIR, DCGM_RELEASE, dcgm_values
from components.observability.neuron import NAME as NEURON_MONITOR
from components.observability.neuron import daemonset, service, service_monitor
from components.observability.nodes import has_accelerator
from components.observability.rules import rule_groups
from components.slinky.state_storage import STATE_STORAGE_CLASS

__all__ = ["DASHBOARDS_DIR", "DCGM_JOB_MAP_DIR", "FSX_VARIABLE", "GRAFANA_ADMIN_SECRET", "Observability",
           "ObservabilityArgs", "dashboard_files", "dashboard_json", "kube_prometheus_values"]

DASHBOARDS_DIR = Path(__file__).resolve().parent / "dashboards"
GRAFANA_ADMIN_SECRET = "grafana-admin"
# grafana-community/helm-charts grafana-12.10.4 (kube-prometheus-stack 88.2.0 Chart.yaml dependency) and
# kube-prometheus-stack values.yaml grafana.admin: the keys of the existing Secret.
ADMIN_USER_KEY, ADMIN_PASSWORD_KEY = "admin-user", "admin-password"
# kube-prometheus-stack-88.2.0 values.yaml grafana.sidecar.dashboards.label / labelValue.
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
RULES_KEY = "slurm-eks"  # the PrometheusRule's name suffix under additionalPrometheusRulesMap
FSX_VARIABLE = "filesystem"  # fsx.json's FileSystemId variable: it lists every FSx file system in the region


def dashboard_files() -> dict[str, Path]:
    """The dashboards by ConfigMap key (file name)."""
    return {p.name: p for p in sorted(DASHBOARDS_DIR.glob("*.json"))}


def dashboard_json(path: Path, file_system_id: str | None = None) -> str:
    """A dashboard as its ConfigMap holds it; with `file_system_id`, the FSx variable starts on this stack's file
    system (Grafana keeps a variable's `current` while its query still lists that value)."""
    doc = json.loads(path.read_text())
    for variable in doc.get("templating", {}).get("list", []):
        if file_system_id and variable.get("name") == FSX_VARIABLE:
            variable["current"] = {"selected": True, "text": file_system_id, "value": file_system_id}
    return json.dumps(doc, sort_keys=True)


def _dashboard_data(path: Path, file_system_id: pulumi.Input[str] | None) -> pulumi.Input[str]:
    """Only the FSx dashboard waits for the file system's id; the others are plain text."""
    variables = json.loads(path.read_text()).get("templating", {}).get("list", [])
    if file_system_id is None or all(v.get("name") != FSX_VARIABLE for v in variables):
        return dashboard_json(path)
    return pulumi.Output.from_input(file_system_id).apply(lambda fs: dashboard_json(path, fs))


def kube_prometheus_values(config: ClusterConfig, grafana_role_arn: pulumi.Input[str]) -> dict[str, Any]:
    """Merge into the kube-prometheus-stack values (keys: kube-prometheus-stack-88.2.0 values.yaml);
    `grafana_role_arn`: GrafanaCloudWatch's role (components/observability/cloudwatch.py)."""
    return {
        "alertmanager": {"enabled": False},
        "additionalPrometheusRulesMap": {RULES_KEY: {"groups": rule_groups(config)}},
        "grafana": {
            "enabled": True,
            "nodeSelector": SYSTEM_NODE_SELECTOR,
            "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": ADMIN_USER_KEY,
                      "passwordKey": ADMIN_PASSWORD_KEY},
            # grafana-12.10.4 values.yaml persistence: a claim on the encrypted, retained gp3 class.
            "persistence": {"enabled": True, "type": "pvc", "storageClassName": STATE_STORAGE_CLASS,
                            "accessModes": ["ReadWriteOnce"], "size": f"{config.health.grafana_storage_gib}Gi"},
            # A ReadWriteOnce volume: the old pod must let go before the new one mounts it.
            "deploymentStrategy": {"type": "Recreate"},
            "sidecar": {"dashboards": {"enabled": True, "label": next(iter(DASHBOARD_LABEL)),
                                       "labelValue": DASHBOARD_LABEL["grafana_dashboard"],
                                       "searchNamespace": namespaces.MONITORING}},
            **grafana_values(config.region, grafana_role_arn),
        },
    }


@dataclass(frozen=True)
class ObservabilityArgs:
    config: ClusterConfig
    namespaces: Namespaces  # for the Kubernetes provider
    prometheus: pulumi.Resource  # the kube-prometheus-stack release: CRDs (ServiceMonitor) and Grafana's sidecar
    monitoring: Sequence[pulumi.Resource] = ()  # the monitoring Namespace and its NetworkPolicies
    file_system_id: pulumi.Input[str] | None = None  # FSx for Lustre (components/storage/fsx.py): fsx.json's default


class Observability(pulumi.ComponentResource):
    releases: dict[str, pulumi.Resource]

    def __init__(self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:Observability", name, None, opts)
        provider, config = args.namespaces.provider, args.config
        # Only after the namespace, never after the release: Grafana's pod waits for this Secret, and the
        # release (which Pulumi awaits) waits for Grafana.
        password = random.RandomPassword(f"{name}-grafana-admin", length=32, special=False,
                                         opts=pulumi.ResourceOptions(parent=self))
        k8s.core.v1.Secret(
            f"{name}-grafana-admin", metadata={"name": GRAFANA_ADMIN_SECRET, "namespace": namespaces.MONITORING},
            string_data={ADMIN_USER_KEY: "admin", ADMIN_PASSWORD_KEY: password.result},
            opts=pulumi.ResourceOptions(parent=self, provider=provider, depends_on=list(args.monitoring)))
        after = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[args.prometheus])
        for key, path in dashboard_files().items():
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{path.stem}",
                metadata={"name": f"dashboard-{path.stem}", "namespace": namespaces.MONITORING,
                          "labels": DASHBOARD_LABEL},
                data={key: _dashboard_data(path, args.file_system_id)}, opts=after)
        self.releases = {}
        if has_accelerator(config, "nvidia"):
            self.releases[DCGM_RELEASE] = release(DCGM_RELEASE, DCGM_EXPORTER, dcgm_values(config), provider, self,
                                                  list(args.monitoring), [args.prometheus])
        if has_accelerator(config, "neuron"):
            self._neuron_monitor(name, config, after)
        self.register_outputs({"dashboards": sorted(dashboard_files()), "releases": sorted(self.releases)})

    def _neuron_monitor(self, name: str, config: ClusterConfig, opts: pulumi.ResourceOptions) -> None:
        ds, svc, monitor = daemonset(config), service(), service_monitor()
        k8s.apps.v1.DaemonSet(f"{name}-{NEURON_MONITOR}", metadata=ds["metadata"], spec=ds["spec"], opts=opts)
        k8s.core.v1.Service(f"{name}-{NEURON_MONITOR}", metadata=svc["metadata"], spec=svc["spec"], opts=opts)
        k8s.apiextensions.CustomResource(
            f"{name}-{NEURON_MONITOR}-monitor", api_version="monitoring.coreos.com/v1", kind="ServiceMonitor",
            metadata=monitor["metadata"], spec=monitor["spec"], opts=opts)
