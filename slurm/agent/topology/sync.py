"""Keeps Slurm's network topology current from EC2: the node lifecycle controller's topology step.

Each pass: the slurmd pods (Slinky names each Slurm node after its pod: slurm-operator v1.2.1
internal/controller/nodeset/utils/utils.go GetSlurmNodeName) and the Kubernetes nodes they run on; each node's
instance id from spec.providerID (`aws:///<zone>/<instance id>`, as Karpenter sets it:
aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider/cloudprovider.go); EC2
DescribeInstanceTopology for those instances; the switch tree (slurm/agent/topology/tree.py). Then two writes, each
only when it changed:
- topology.yaml in the ConfigMap the Controller lists in configFileRefs: Slinky mounts it in slurmctld's
  /etc/slurm, and with inplaceReconfigure its reconfigure container runs `scontrol reconfigure` when a file there
  changes (slurm-operator v1.2.1 internal/builder/controllerbuilder/scripts/reconfigure.sh);
- the annotation `topology.slinky.slurm.net/spec: <topology>:<leaf switch>` on each Kubernetes node, which the
  operator copies to the Slurm nodes of the NodeSet pods there as their dynamic topology (slurm-operator v1.2.1
  docs/usage/topology.md, internal/controller/nodeset/nodeset_sync.go syncSlurmTopology), so a pod that moves
  to another instance is placed right away, before the next reconfigure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.client import BaseClient

from slurm.agent.topology.instance_topology import InstanceTopology, describe
from slurm.agent.topology.render import flat_topology_yaml, render_topology_yaml
from slurm.agent.topology.tree import build_tree

ANNOTATION = "topology.slinky.slurm.net/spec"  # slurm-operator v1.2.1 api/v1beta1/well_known.go
PROVIDER_PREFIX = "aws:///"
Log = Callable[[dict[str, Any]], None]


class KubeApi(Protocol):
    """The Kubernetes calls this step makes. The controller passes its client (slurm/agent/kube.py's `Kube`);
    declared here, not imported, so slurm.topology stays standard library only and needs nothing of the agent
    package or slurm.health, which runs it."""

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...

    def nodes(self) -> list[dict[str, Any]]: ...

    def annotate_node(self, name: str, annotations: dict[str, str]) -> None: ...

    def get_configmap(self, name: str, namespace: str = "slurm") -> dict[str, Any] | None: ...

    def replace_configmap(self, configmap: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class TopologySettings:
    name: str  # the topology's name in topology.yaml and in the annotation
    namespace: str
    pod_selector: str  # the slurmd pods, e.g. app.kubernetes.io/name=slurmd
    config_map: str
    key: str = "topology.yaml"


def instance_id(node: dict[str, Any]) -> str | None:
    """`aws:///us-west-2a/i-0123456789abcdef0` -> `i-0123456789abcdef0`."""
    provider = (node.get("spec") or {}).get("providerID") or ""
    return provider.rpartition("/")[2] if provider.startswith(PROVIDER_PREFIX) else None


def slurm_nodes_by_host(kube: KubeApi, settings: TopologySettings) -> dict[str, list[str]]:
    """Kubernetes node -> the Slurm nodes (slurmd pods) scheduled on it."""
    hosts: dict[str, list[str]] = {}
    for pod in kube.pods(settings.namespace, settings.pod_selector):
        host = (pod.get("spec") or {}).get("nodeName")
        if host:
            hosts.setdefault(host, []).append(pod["metadata"]["name"])
    return hosts


def topology_pass(kube: KubeApi, ec2: BaseClient, settings: TopologySettings, log: Log,
                  known: dict[str, InstanceTopology] | None = None) -> str:
    """One sync; returns the topology.yaml it leaves in place. `known` (kept by the caller across passes) holds the
    placed instances already read: a running instance keeps its place in the network, so EC2 is asked only about
    instances new to it (and those it had no topology for yet)."""
    known = {} if known is None else known
    hosts = slurm_nodes_by_host(kube, settings)
    nodes = {node["metadata"]["name"]: node for node in kube.nodes() if node["metadata"]["name"] in hosts}
    instances = {host: iid for host, node in nodes.items() if (iid := instance_id(node))}
    new = sorted(set(instances.values()) - known.keys())
    known.update((r.instance_id, r) for r in (describe(ec2, new) if new else []) if r.placed)
    records = [known[iid] for iid in set(instances.values()) if iid in known]
    by_instance: dict[str, list[str]] = {}
    for host, slurm_nodes in hosts.items():
        by_instance.setdefault(instances.get(host, f"unknown:{host}"), []).extend(slurm_nodes)
    if by_instance:
        tree = build_tree(records, by_instance)
        text = render_topology_yaml(tree, settings.name)
        for host, slurm_nodes in sorted(hosts.items()):
            spec = f"{settings.name}:{tree.leaf_of(slurm_nodes[0])}"
            if host in nodes and (nodes[host]["metadata"].get("annotations") or {}).get(ANNOTATION) != spec:
                kube.annotate_node(host, {ANNOTATION: spec})
                log({"event": "topology-annotated", "node": host, "spec": spec})
    else:
        text = flat_topology_yaml(settings.name)
    config_map = kube.get_configmap(settings.config_map, settings.namespace)
    if config_map is not None and (config_map.get("data") or {}).get(settings.key) != text:
        config_map["data"] = {**(config_map.get("data") or {}), settings.key: text}
        kube.replace_configmap(config_map)
        log({"event": "topology-written", "configMap": settings.config_map, "instances": len(records),
             "slurmNodes": sum(len(v) for v in hosts.values())})
    return text
