"""Each partition's NodeSet follows its Slurm queue: KEDA scales the NodeSet (its scale subresource) from
metrics in Prometheus, and Karpenter brings up or gives back the nodes its pods need.

The target is the number of nodes the partition needs now: nodes running jobs (Slurm's own metrics) plus the
nodes its pending jobs want, counting only jobs that would start if the nodes existed
(`slurm_eks_partition_nodes_wanted`, slurm/agent/health/demand.py in the lifecycle controller: a held job, one over
its QoS or association cap, or one waiting on a dependency or a begin time wants none; each of our job
templates takes whole nodes). While that series is absent (the controller down) the target falls back to
Slurm's own count of pending jobs that are not held, plus the extra nodes of the widest of them (Slurm 25.11's
`_nohold` series; a QoS-capped or dependency-waiting job still counts there, which only our series tells
apart). With `AverageValue` and a target of 1 per replica, HPA sets replicas to that number, between
minNodes and maxNodes. When a partition has had neither running nor wanting jobs for `idleTimeout`, KEDA
scales it to minNodes; Slinky drains a Slurm node before deleting its pod, and Karpenter removes the then-empty
node after its own `idleTimeout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.config.base import duration_seconds
from components.config.cluster import ClusterConfig
from components.kubernetes.charts import KEDA, KUBE_PROMETHEUS_STACK, release
from components.kubernetes.namespaces import Namespaces
from components.names import SLURM_NAMESPACE
from components.observability.metric_catalog import PARTITION_NODES_WANTED
from components.observability.stack import kube_prometheus_values
from components.slinky.specs import API_VERSION

PROMETHEUS_RELEASE = "prometheus"
# The Service kube-prometheus-stack names `<release>-kube-prometheus-prometheus`.
PROMETHEUS_URL = f"http://{PROMETHEUS_RELEASE}-kube-prometheus-prometheus.{KUBE_PROMETHEUS_STACK.namespace}.svc:9090"
POLLING_SECONDS = 30
# The HPA scales up to the lowest recommendation of this window (kubernetes.io/docs/tasks/run-application/
# horizontal-pod-autoscale, "Stabilization window"). The query adds Slurm's busy nodes to the lifecycle controller's
# wanted ones, two series sampled at different moments: when a job starts, Slurm counts its nodes busy while the
# demand series (computed every DEMAND_SECONDS, then scraped) still counts them wanted, and one HPA sync in that
# gap doubled the job's nodes for the whole scale-down window (seen on the twin: a 2-node job brought 4 nodes).
# A minute covers the demand pass (15 s) and a scrape (30 s); a lasting demand still scales up a minute later.
SCALE_UP_WINDOW_SECONDS = 60


def nodes_needed_query(partition: str) -> str:
    """PromQL: nodes the partition needs now (absent series count as 0, so one missing metric is not 0 nodes):
    busy nodes plus what the pending jobs that could start want, or, while our exporter's series is absent,
    Slurm's count of pending jobs not held plus the widest such job's extra nodes."""
    def series(name: str) -> str:
        return f'sum({name}{{partition="{partition}"}})'

    def metric(name: str) -> str:
        return f"({series(name)} or vector(0))"

    busy = f"{metric('slurm_partition_nodes_alloc')} + {metric('slurm_partition_nodes_mixed')}"
    # Held jobs counted out: partition_jobs_hold counts pending jobs whose reason is WAIT_HELD or WAIT_HELD_USER,
    # and partition_jobs_min_job_nodes_nohold is the widest pending job's min_nodes over the others (slurm-25.11.7
    # src/slurmctld/statistics.c, "Custom Slinky metrics for autoscaling"; src/plugins/metrics/openmetrics/
    # openmetrics.c names the series).
    not_held = f"clamp_min({metric('slurm_partition_jobs_pending')} - {metric('slurm_partition_jobs_hold')}, 0)"
    widest_extra = f"clamp_min({metric('slurm_partition_jobs_min_job_nodes_nohold')} - 1, 0)"
    slurm_count = f"{not_held} + {widest_extra}"
    return f"{busy} + ({series(PARTITION_NODES_WANTED)} or ({slurm_count}))"


def scaled_object_spec(name: str, config: ClusterConfig) -> dict[str, Any]:
    partition = config.partitions[name]
    idle = duration_seconds(partition.idle_timeout)
    return {
        "scaleTargetRef": {"apiVersion": API_VERSION, "kind": "NodeSet", "name": name},
        "minReplicaCount": partition.min_nodes,
        "maxReplicaCount": partition.max_nodes,
        "pollingInterval": POLLING_SECONDS,
        "cooldownPeriod": idle,  # no activity this long: to zero (when minNodes is 0)
        "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
            # Between min and max, HPA also waits idleTimeout before removing nodes.
            "scaleDown": {"stabilizationWindowSeconds": idle},
            "scaleUp": {"stabilizationWindowSeconds": SCALE_UP_WINDOW_SECONDS}}}},
        "triggers": [{
            "type": "prometheus",
            "metricType": "AverageValue",
            "metadata": {"serverAddress": PROMETHEUS_URL, "query": nodes_needed_query(name), "threshold": "1"},
        }],
    }


@dataclass(frozen=True)
class AutoscalingArgs:
    config: ClusterConfig
    namespaces: Namespaces  # KEDA's and Prometheus's, and the Kubernetes provider
    storage_class: pulumi.Resource  # Grafana's volume (components/slinky/state_storage.py)
    grafana_role_arn: pulumi.Input[str]  # Grafana's CloudWatch reader (components/observability/cloudwatch.py)


class Autoscaling(pulumi.ComponentResource):
    """KEDA and Prometheus first (`metrics` is what the Controller's ServiceMonitor needs); then
    `scale(nodesets)` adds one ScaledObject per NodeSet."""

    metrics: k8s.helm.v3.Release
    monitoring: list[pulumi.Resource]  # the monitoring Namespace and its NetworkPolicies

    def __init__(self, name: str, args: AutoscalingArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:Autoscaling", name, None, opts)
        self._args, self._prefix = args, name
        on_system = {"nodeSelector": SYSTEM_NODE_SELECTOR}
        provider = args.namespaces.provider
        self._keda = release("keda", KEDA, on_system, provider, self,
                             args.namespaces.create(f"namespace-{KEDA.namespace}", KEDA.namespace, self))
        monitoring = args.namespaces.create(f"namespace-{KUBE_PROMETHEUS_STACK.namespace}",
                                            KUBE_PROMETHEUS_STACK.namespace, self)
        self.monitoring = monitoring
        self.metrics = release(PROMETHEUS_RELEASE, KUBE_PROMETHEUS_STACK, {
            # Grafana (a gp3 volume: after the storage class), the dashboards' sidecar and the alert rules.
            **kube_prometheus_values(args.config, args.grafana_role_arn),
            "prometheusOperator": {**on_system, "admissionWebhooks": {"patch": on_system}},
            "kube-state-metrics": on_system,
            "prometheus": {"prometheusSpec": {
                **on_system,
                # Select every ServiceMonitor, not only this release's: Slinky creates the Controller's.
                "serviceMonitorSelectorNilUsesHelmValues": False,
                "podMonitorSelectorNilUsesHelmValues": False,
                "retention": "15d",
            }},
        }, provider, self, [*monitoring, args.storage_class])
        self.register_outputs({"prometheus": PROMETHEUS_URL})

    def scale(self, nodesets: dict[str, pulumi.Resource]) -> None:
        for pname, nodeset in nodesets.items():
            k8s.apiextensions.CustomResource(
                f"{self._prefix}-{pname}", api_version="keda.sh/v1alpha1", kind="ScaledObject",
                metadata={"name": pname, "namespace": SLURM_NAMESPACE},
                spec=scaled_object_spec(pname, self._args.config),
                opts=pulumi.ResourceOptions(parent=self, provider=self._args.namespaces.provider,
                                            depends_on=[self._keda, self.metrics, nodeset]))
