"""Device plugins: they tell the kubelet how many GPUs (`nvidia.com/gpu`), Trainium devices
(`aws.amazon.com/neuron`) and EFA interfaces (`vpc.amazonaws.com/efa`) a node has, so slurmd pods can request
them. Each plugin is installed only when some partition or Kubernetes pool (`kubernetesPools`) has that
hardware, and runs only on the nodes that carry it: the labels and taints come from `components.compute.scheduling`
and `components.compute.nodepools` (pools), the same source as the NodePools. A pool's nodes carry the accelerator
labels a partition's do, plus the pool's own taint, which the plugins tolerate by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.catalog import AcceleratorKind, lookup
from components.compute.nodepools import POOL_LABEL, pool_taints
from components.compute.scheduling import (
    NEURON_PRESENT_LABEL,
    NVIDIA_PRESENT_LABEL,
    PARTITION_LABEL,
    accelerator_tolerations,
    node_taints,
    partition_instance,
    tolerations_for,
)
from components.config import cluster as cfg
from components.config.k8s_pools import KubernetesPool
from components.kubernetes.handover import helm_release

Pools = Mapping[str, KubernetesPool]
NO_POOLS: Pools = {}

NAMESPACE = "kube-system"


@dataclass(frozen=True)
class Chart:
    release: str
    chart: str
    version: str
    repo: str | None = None  # None: `chart` is an oci:// reference


# Pinned: a plugin upgrade restarts its DaemonSet on every accelerator node, so it happens only by review.
NVIDIA = Chart("nvidia-device-plugin", "nvidia-device-plugin", "0.19.3", "https://nvidia.github.io/k8s-device-plugin")
EFA = Chart("aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin", "v0.5.20", "https://aws.github.io/eks-charts")
NEURON = Chart("neuron-device-plugin", "oci://public.ecr.aws/neuron/neuron-helm-chart", "1.9.0")


def _taints(partitions: Mapping[str, cfg.Partition], pools: Pools, kind: AcceleratorKind) -> list[dict[str, str]]:
    """The taints of every node with this accelerator: a partition's carry the accelerator's, a pool's its own
    too (validation keeps a pool to one accelerator kind, like a partition)."""
    found = [t for p in partitions.values() for it in map(lookup, p.instance_types) if it.accelerator == kind
             for t in node_taints(it)]
    return found + [t for name, p in pools.items() if partition_instance(p).accelerator == kind
                    for t in pool_taints(name, p)]


def _tolerations(taints: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Tolerate exactly the taints these nodes carry."""
    unique = {(t["key"], t["value"], t["effect"]): t for t in taints}
    return tolerations_for([unique[k] for k in sorted(unique)])


def _only_on(label: str, values: list[str]) -> dict[str, Any]:
    """Node affinity that replaces a chart's default selection (lists in Helm values replace, not merge)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": label, "operator": "In", "values": values}]}]}}}


def nvidia_values(partitions: Mapping[str, cfg.Partition], pools: Pools = NO_POOLS) -> dict[str, Any] | None:
    gpus = _taints(partitions, pools, "nvidia")
    if not gpus:
        return None
    return {"affinity": _only_on(NVIDIA_PRESENT_LABEL, ["true"]), "tolerations": _tolerations(gpus)}


def efa_values(partitions: Mapping[str, cfg.Partition], pools: Pools = NO_POOLS) -> dict[str, Any] | None:
    efa = sorted(name for name, p in partitions.items() if p.efa)
    efa_pools = sorted(name for name, p in pools.items() if p.efa)
    if not efa and not efa_pools:
        return None
    # The chart ORs one term per key over the same values (aws/eks-charts stable/aws-efa-k8s-device-plugin/
    # templates/daemonset.yaml, nodeSelectorTerms per supportedInstanceLabels.keys); keyed on the partition
    # (and pool) label instead of its built-in instance-type list, it runs exactly where Karpenter attaches EFA
    # interfaces. Partition and pool names never collide (validator pool-name), so one list serves both keys.
    # Those nodes are GPU or Trainium nodes: it tolerates every accelerator taint, and each EFA pool's own.
    keys = ([PARTITION_LABEL] if efa else []) + ([POOL_LABEL] if efa_pools else [])
    own = [pool_taints(name, pools[name])[0] for name in efa_pools]
    return {"supportedInstanceLabels": {"keys": keys, "values": sorted(efa + efa_pools)},
            "tolerations": accelerator_tolerations() + _tolerations(own)}


def neuron_values(partitions: Mapping[str, cfg.Partition], pools: Pools = NO_POOLS) -> dict[str, Any] | None:
    chips = _taints(partitions, pools, "neuron")
    if not chips:
        return None
    return {
        "devicePlugin": {"affinity": _only_on(NEURON_PRESENT_LABEL, ["true"]), "tolerations": _tolerations(chips)},
        # A slurmd pod takes every device of its node, so the scheduler extension (contiguous core
        # placement for pods sharing a node) has nothing to do; node problem detection is out of scope here.
        "scheduler": {"enabled": False},
        "npd": {"enabled": False},
    }


def plugin_values(partitions: Mapping[str, cfg.Partition], pools: Pools = NO_POOLS) -> dict[Chart, dict[str, Any]]:
    """The plugins these partitions and pools need, each with its chart values."""
    wanted = {NVIDIA: nvidia_values(partitions, pools), EFA: efa_values(partitions, pools),
              NEURON: neuron_values(partitions, pools)}
    return {chart: values for chart, values in wanted.items() if values is not None}


@dataclass(frozen=True)
class DevicePluginsArgs:
    partitions: Mapping[str, cfg.Partition]
    provider: k8s.Provider
    pools: Pools = field(default_factory=dict)


class DevicePlugins(pulumi.ComponentResource):
    releases: dict[str, k8s.helm.v3.Release]

    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:DevicePlugins", name, None, opts)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        self.releases = {
            chart.release: helm_release(  # Argo CD's in gitops mode (components/kubernetes/handover.py)
                f"{name}-{chart.release}", name=chart.release, chart=chart.chart, version=chart.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo) if chart.repo else None,
                namespace=NAMESPACE, values=values, opts=k8s_opts)
            for chart, values in plugin_values(args.partitions, args.pools).items()
        }
        self.register_outputs({"releases": sorted(self.releases)})
