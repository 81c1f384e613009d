"""Every Helm chart the Slurm side installs, pinned, and one way to install them on the system nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_LABEL, SYSTEM_NODE_SELECTOR
from components.kubernetes import namespaces
from components.kubernetes.handover import helm_release


@dataclass(frozen=True)
class Chart:
    chart: str  # a name in `repo`, or an oci:// reference
    version: str
    namespace: str
    repo: str | None = None


SLINKY_CHARTS = "oci://ghcr.io/slinkyproject/charts"
CERT_MANAGER = Chart("cert-manager", "v1.21.1", namespaces.CERT_MANAGER, "https://charts.jetstack.io")
SLURM_OPERATOR_CRDS = Chart(f"{SLINKY_CHARTS}/slurm-operator-crds", "1.2.1", namespaces.SLINKY)
SLURM_OPERATOR = Chart(f"{SLINKY_CHARTS}/slurm-operator", "1.2.1", namespaces.SLINKY)
MARIADB_OPERATOR_CRDS = Chart("mariadb-operator-crds", "26.6.0", namespaces.MARIADB_OPERATOR,
                              "https://helm.mariadb.com/mariadb-operator")
MARIADB_OPERATOR = Chart("mariadb-operator", "26.6.0", namespaces.MARIADB_OPERATOR,
                         "https://helm.mariadb.com/mariadb-operator")
KEDA = Chart("keda", "2.20.2", namespaces.KEDA, "https://kedacore.github.io/charts")
# Ships prometheus-operator v0.93.0, the ServiceMonitor CRD version in ../shared/crds/prometheus-operator.
KUBE_PROMETHEUS_STACK = Chart("kube-prometheus-stack", "88.2.0", namespaces.MONITORING,
                              "https://prometheus-community.github.io/helm-charts")

# For charts that take affinity but no nodeSelector (slurm-operator).
SYSTEM_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": SYSTEM_LABEL, "operator": "In", "values": [SYSTEM_NODE_SELECTOR[SYSTEM_LABEL]]}]}]}}}


def release(name: str, chart: Chart, values: dict[str, Any], provider: k8s.Provider, parent: pulumi.Resource,
            namespace: list[pulumi.Resource], depends_on: list[pulumi.Resource] | None = None,
            ) -> pulumi.Resource:
    """A Release that Pulumi waits on until its workloads are ready (so dependants see working webhooks), after
    `namespace`: the chart's Namespace with its Pod Security labels and its NetworkPolicies
    (components/segmentation/segmented_namespaces.py). Helm does not create it, so no pod runs there before
    them. In gitops mode the chart is Argo CD's (components/kubernetes/handover.py)."""
    return helm_release(
        name,
        name=name,
        chart=chart.chart,
        version=chart.version,
        namespace=chart.namespace,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
        values=values,
        skip_await=False,
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[*namespace, *(depends_on or [])]),
    )
