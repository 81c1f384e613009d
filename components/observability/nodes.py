"""Where the accelerator exporters run: the nodes of the Slurm partitions with that accelerator, exactly. The
labels and taints come from components.compute.scheduling, the NodePools' own source, so they always match. Kubernetes
pools' nodes carry the accelerator label too but also their pool taint, which is not tolerated here, and lack the
partition label required here: a pool runs no Slurm job, so no job mapping and no drain to explain."""

from __future__ import annotations

from typing import Any

from components.catalog import AcceleratorKind, lookup
from components.compute.scheduling import (
    NEURON_PRESENT_LABEL,
    NVIDIA_PRESENT_LABEL,
    PARTITION_LABEL,
    node_taints,
    tolerations_for,
)
from components.config.cluster import ClusterConfig

PRESENT_LABEL: dict[AcceleratorKind, str] = {"nvidia": NVIDIA_PRESENT_LABEL, "neuron": NEURON_PRESENT_LABEL}


def has_accelerator(config: ClusterConfig, kind: AcceleratorKind) -> bool:
    """Whether some partition's nodes have this accelerator."""
    return any(lookup(t).accelerator == kind for p in config.partitions.values() for t in p.instance_types)


def accelerator_affinity(kind: AcceleratorKind) -> dict[str, Any]:
    """Required: the accelerator's label and a partition label (so a partition's node, never a pool's)."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": PRESENT_LABEL[kind], "operator": "In", "values": ["true"]},
                              {"key": PARTITION_LABEL, "operator": "Exists"}]}]}}}


def accelerator_tolerations(config: ClusterConfig, kind: AcceleratorKind) -> list[dict[str, Any]]:
    """Exactly the taints those partitions' nodes carry."""
    taints = {(t["key"], t["value"], t["effect"]): t for p in config.partitions.values()
              for it in map(lookup, p.instance_types) if it.accelerator == kind for t in node_taints(it)}
    return tolerations_for([taints[k] for k in sorted(taints)])
