"""How a Slurm partition's pods find its nodes: the labels and taints Karpenter puts on them and the
selectors and tolerations the Slinky NodeSet and device plugins use. One source, so they always match."""

from __future__ import annotations

from typing import Any

from components import catalog
from components.catalog import AcceleratorKind, InstanceType
from components.config.k8s_pools import NodeGroup

PARTITION_LABEL = "node.slurm-eks.io/partition"
ACCELERATOR_LABEL = "node.slurm-eks.io/accelerator"
NVIDIA_PRESENT_LABEL = "nvidia.com/gpu.present"  # what the NVIDIA device plugin chart selects on
NEURON_PRESENT_LABEL = "aws.amazon.com/neuron.present"

TAINT_KEYS: dict[AcceleratorKind, str] = {"nvidia": "nvidia.com/gpu", "neuron": "aws.amazon.com/neuron"}
DEVICE_RESOURCES: dict[AcceleratorKind, str] = {"nvidia": "nvidia.com/gpu", "neuron": "aws.amazon.com/neuron"}
EFA_RESOURCE = "vpc.amazonaws.com/efa"


def node_labels(partition: str, instance: InstanceType) -> dict[str, str]:
    labels = {PARTITION_LABEL: partition, ACCELERATOR_LABEL: instance.accelerator}
    if instance.accelerator == "nvidia":
        labels[NVIDIA_PRESENT_LABEL] = "true"
    elif instance.accelerator == "neuron":
        labels[NEURON_PRESENT_LABEL] = "true"
    return labels


def node_taints(instance: InstanceType) -> list[dict[str, str]]:
    """Accelerator nodes are tainted so only pods that need the device (and its plugins) land there."""
    key = TAINT_KEYS.get(instance.accelerator)
    return [{"key": key, "value": "true", "effect": "NoSchedule"}] if key else []


def tolerations_for(taints: list[dict[str, str]]) -> list[dict[str, Any]]:
    return [{"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]} for t in taints]


def accelerator_tolerations() -> list[dict[str, Any]]:
    """Tolerate every accelerator taint: for DaemonSets such as the EFA device plugin that run on all of them."""
    return [{"key": key, "operator": "Exists", "effect": "NoSchedule"} for key in TAINT_KEYS.values()]


def device_requests(instance: InstanceType, efa_interfaces: int) -> dict[str, str]:
    """Everything one node has, so that one slurmd pod fills one node."""
    requests: dict[str, str] = {}
    resource = DEVICE_RESOURCES.get(instance.accelerator)
    if resource:
        requests[resource] = str(instance.accelerators)
    if efa_interfaces:
        requests[EFA_RESOURCE] = str(efa_interfaces)
    return requests


def partition_instance(partition: NodeGroup) -> catalog.InstanceType:
    """A partition's or pool's representative type (validation guarantees one accelerator kind and count)."""
    return catalog.lookup(partition.instance_types[0])


def partition_efa_interfaces(partition: NodeGroup) -> int:
    """EFA interfaces every node of a partition or pool has (the smallest count of its types)."""
    return min(catalog.lookup(t).efa_interfaces for t in partition.instance_types) if partition.efa else 0
