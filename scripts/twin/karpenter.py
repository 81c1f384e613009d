"""Karpenter's node for a NodeSet pod, and the pod's binding to it, for the twin.

Karpenter launches one instance for an unschedulable NodeSet pod (the NodeSet's pod anti-affinity on
kubernetes.io/hostname keeps one a node) and the node registers with the labels Karpenter and the kubelet give it
(karpenter.sh/nodepool, node.kubernetes.io/instance-type, topology.kubernetes.io/zone: Karpenter v1.14 docs
"Well-Known Labels") and spec.providerID `aws:///<zone>/<instance id>` (aws/karpenter-provider-aws v1.14.1
pkg/cloudprovider/cloudprovider.go). When the scheduler binds the pod, Slinky's pod-binding webhook copies the
node's `topology.slinky.slurm.net/spec` annotation onto the pod (slurm-operator v1.2.1
internal/webhook/pod_binding_webhook.go Default), which the slurmd container reads as POD_TOPOLOGY and the
entrypoint adds to slurmd's --conf as `Topology=` (slurmd-entrypoint.sh). A node Karpenter has just made has no
annotation yet (the topology agent writes it once the node runs a slurmd pod: slurm/agent/topology/sync.py), so
a first pod binds without one, on EKS as on the twin.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
from typing import Any

from scripts.twin.operator.model import PodPlan
from slurm.agent.topology.sync import ANNOTATION

PARTITION_LABEL = "node.slurm-eks.io/partition"
# The twin's nodes are in this zone of the stack's region: which zone EC2 picks is not the twin's to know.
ZONE_SUFFIX = "a"


def node_for(pod: PodPlan, instance_type: str, vpc_cidr: str, index: int, region: str = "us-west-2") -> dict[str, Any]:
    """The Kubernetes node Karpenter brings for `pod`: an instance in the VPC, one pod a node."""
    network = ipaddress.ip_network(vpc_cidr)
    address = network.network_address + 256 * 64 + 10 + index  # a private address of a node subnet
    instance = "i-" + hashlib.sha256(f"{pod.name}/{index}".encode()).hexdigest()[:17]
    zone = f"{region}{ZONE_SUFFIX}"
    selector = pod.spec.get("nodeSelector") or {}
    return {
        "metadata": {"name": f"ip-{str(address).replace('.', '-')}.{region}.compute.internal",
                     "labels": {**selector, "node.kubernetes.io/instance-type": instance_type,
                                "topology.kubernetes.io/zone": zone},
                     "annotations": {}},
        "spec": {"providerID": f"aws:///{zone}/{instance}", "podName": pod.name},
    }


def bind(pod: PodPlan, node: dict[str, Any]) -> PodPlan:
    """The pod as the pod-binding webhook leaves it on `node`: the node's topology annotation, when it has one."""
    spec = (node["metadata"].get("annotations") or {}).get(ANNOTATION)
    if not spec:
        return pod
    return dataclasses.replace(pod, annotations={**pod.annotations, ANNOTATION: spec})
