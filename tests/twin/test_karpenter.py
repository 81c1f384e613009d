"""Karpenter's node for a NodeSet pod and the pod-binding webhook on the twin (scripts/twin/karpenter.py): the node
carries the labels and providerID Karpenter gives it; a node the topology agent has annotated hands its
`topology.slinky.slurm.net/spec` to a pod bound there, which slurmd's POD_TOPOLOGY reads; a new node has none."""

from __future__ import annotations

from scripts.twin.karpenter import bind, node_for
from scripts.twin.operator.model import PodPlan
from slurm.agent.topology.sync import ANNOTATION, instance_id
from tests.twin.operator_plan import nodeset_pods


def h100_pod() -> PodPlan:
    return nodeset_pods("prod")["gpu-h100"]


def pod_topology_path(pod: PodPlan) -> str:
    (var,) = [v for v in pod.containers[0].env if v.name == "POD_TOPOLOGY"]
    assert var.value_from is not None
    return str(var.value_from["fieldRef"]["fieldPath"])


def test_a_new_node_binds_its_pod_without_a_topology() -> None:
    pod = h100_pod()
    node = node_for(pod, "p5.48xlarge", "10.0.0.0/16", 0)
    labels = node["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert labels["node.slurm-eks.io/partition"] == "gpu-h100"  # the NodeSet's nodeSelector
    assert instance_id(node) and instance_id(node).startswith("i-")  # the topology agent can read it
    assert ANNOTATION not in bind(pod, node).annotations


def test_the_webhook_copies_the_nodes_topology_to_the_pod() -> None:
    pod = h100_pod()
    node = node_for(pod, "p5.48xlarge", "10.0.0.0/16", 0)
    node["metadata"]["annotations"][ANNOTATION] = "ec2:nn-leaf-1"  # as the topology agent writes it
    bound = bind(pod, node)
    assert pod_topology_path(bound) == f"metadata.annotations['{ANNOTATION}']"
    assert bound.annotations[ANNOTATION] == "ec2:nn-leaf-1"
