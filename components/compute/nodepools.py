"""One Karpenter EC2NodeClass + NodePool per Slurm partition and per Kubernetes pool (`kubernetesPools`), generated
from the config and the catalog by the same code: only the labels, the taints and the node class tag differ.

The split: a partition's nodes carry `node.slurm-eks.io/partition=<name>`, which its slurmd pods select; a
pool's nodes carry `node.slurm-eks.io/pool=<name>` instead, and the taint `node.slurm-eks.io/pool=<name>:
NoSchedule`. A slurmd pod neither selects a pool's label nor tolerates its taint; a pool's pods select the
pool's label, which no partition node has.

Nodes exist only while Slurm has work for them: the NodePool consolidates a node only when it is empty
(after `idleTimeout`) and never expires it. Every node runs the pinned AL2023 release (`nodeImage.release`);
a new pin makes nodes drift, and Karpenter replaces drifted nodes only inside `nodeImage.maintenanceWindow`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import catalog
from components.aws.vpc import DISCOVERY_TAG
from components.compute.scheduling import (
    DEVICE_RESOURCES,
    PARTITION_LABEL,
    node_labels,
    node_taints,
    partition_instance,
    tolerations_for,
)
from components.config.cluster import ClusterConfig, MaintenanceWindow
from components.config.k8s_pools import NodeGroup

# Karpenter v1 alias `<family>@<version>`, the version an AMI release tag such as v20260714
# (karpenter.sh docs v1.14, EC2NodeClasses, amiSelectorTerms "alias"): it picks the NVIDIA or Neuron AL2023
# variant of that release per instance type.
AMI_FAMILY = "al2023"
WEEK_HOURS = 7 * 24
CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron day-of-week 0-6
ROOT_VOLUME_GIB = 200  # images and logs; containerd's data lives on the instance-store RAID0
KARPENTER_NODE_API = "karpenter.k8s.aws/v1"
NODEPOOL_API = "karpenter.sh/v1"
POOL_LABEL = "node.slurm-eks.io/pool"  # label and taint key of a Kubernetes pool's nodes
PARTITION_TAG, POOL_TAG = "slurm-eks:partition", "slurm-eks:pool"  # EC2 tags naming an instance's group
# Karpenter models ODCRs and Capacity Blocks alike as capacity type `reserved`, selected by
# capacityReservationSelectorTerms; the label capacity-reservation-type (`default` | `capacity-block`) tells them
# apart and is allowed as a NodePool requirement (aws/karpenter-provider-aws v1.14.1 website/content/en/docs/tasks/
# odcrs.md; pkg/apis/v1/labels.go LabelCapacityReservationType; pkg/apis/v1/ec2nodeclass_status.go
# CapacityReservationTypeCapacityBlock).
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
CAPACITY_RESERVATION_TYPE_LABEL = "karpenter.k8s.aws/capacity-reservation-type"


@dataclass(frozen=True)
class NodeKind:
    """What makes a group's nodes a partition's or a pool's: the tag on its instances, labels, taints."""

    tag: str
    labels: dict[str, str]
    taints: list[dict[str, str]]


def partition_kind(name: str, group: NodeGroup) -> NodeKind:
    instance = partition_instance(group)
    return NodeKind(PARTITION_TAG, node_labels(name, instance), node_taints(instance))


def pool_labels(name: str, group: NodeGroup) -> dict[str, str]:
    """The accelerator labels a partition's nodes have (the device plugins select on them), with the pool's
    label in place of the partition's."""
    accelerator = {k: v for k, v in node_labels(name, partition_instance(group)).items() if k != PARTITION_LABEL}
    return {POOL_LABEL: name, **accelerator}


def pool_taints(name: str, group: NodeGroup) -> list[dict[str, str]]:
    """The pool's own taint first, then the accelerator's (pods asking for a GPU still need to tolerate it)."""
    return [{"key": POOL_LABEL, "value": name, "effect": "NoSchedule"}, *node_taints(partition_instance(group))]


def pool_kind(name: str, group: NodeGroup) -> NodeKind:
    return NodeKind(POOL_TAG, pool_labels(name, group), pool_taints(name, group))


def pool_scheduling(name: str, group: NodeGroup) -> dict[str, Any]:
    """The nodeSelector and tolerations a workload's pod template needs to run on a pool's nodes."""
    return {"nodeSelector": {POOL_LABEL: name}, "tolerations": tolerations_for(pool_taints(name, group))}


def node_class_spec(name: str, partition: NodeGroup, config: ClusterConfig, cluster_name: str,
                    role: pulumi.Input[str], placement_group: pulumi.Input[str] | None,
                    tag: str = PARTITION_TAG) -> dict[str, Any]:
    discovery = [{"tags": {DISCOVERY_TAG: cluster_name}}]
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": f"{AMI_FAMILY}@v{config.node_image.date}"}],
        "role": role,
        "subnetSelectorTerms": discovery,
        "securityGroupSelectorTerms": discovery,
        # IMDSv2 only, and one hop: pods cannot reach the node's credentials.
        "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                            "httpPutResponseHopLimit": 1, "httpTokens": "required"},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {
            "volumeSize": f"{ROOT_VOLUME_GIB}Gi", "volumeType": "gp3", "iops": 6000, "throughput": 500,
            "encrypted": True, "deleteOnTermination": True}}],
        # Local NVMe as one striped volume for kubelet and containerd: image pulls of 20 GB+ training images.
        "instanceStorePolicy": "RAID0",
        "tags": {tag: name, **config.tags},
    }
    if placement_group is not None:
        spec["placementGroupSelector"] = {"name": placement_group}
    if partition.capacity_reservation_ids:
        spec["capacityReservationSelectorTerms"] = [{"id": cr} for cr in partition.capacity_reservation_ids]
    return spec


def karpenter_capacity_type(group: NodeGroup) -> str:
    """The karpenter.sh/capacity-type value of the group's nodes: a Capacity Block is `reserved` to Karpenter."""
    return "reserved" if group.reserved else group.capacity_type


def node_pool_spec(name: str, partition: NodeGroup, config: ClusterConfig, kind: NodeKind | None = None
                   ) -> dict[str, Any]:
    instance = partition_instance(partition)
    kind = kind or partition_kind(name, partition)
    types = [catalog.lookup(t) for t in partition.instance_types]
    requirements: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(partition.instance_types)},
        {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [karpenter_capacity_type(partition)]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    if partition.capacity_type == "capacity-block":
        # Only the blocks, never an ODCR that a selector term might also match.
        requirements.append({"key": CAPACITY_RESERVATION_TYPE_LABEL, "operator": "In", "values": ["capacity-block"]})
    if partition.efa:
        # EFA traffic stays inside one zone: every node of the partition or pool lands in it.
        requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In",
                             "values": [config.network.efa_availability_zone]})
    limits = {"cpu": str(partition.max_nodes * max(t.vcpu for t in types)),
              "memory": f"{partition.max_nodes * max(t.memory_gib for t in types)}Gi"}
    device = DEVICE_RESOURCES.get(instance.accelerator)
    if device:
        limits[device] = str(partition.max_nodes * instance.accelerators)
    return {
        "template": {
            "metadata": {"labels": kind.labels},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
                "requirements": requirements,
                "taints": kind.taints,
                # Nodes live until they are empty; a multi-day job is never cut short by node age.
                "expireAfter": "Never",
            },
        },
        "limits": limits,
        "disruption": {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": partition.idle_timeout,
            "budgets": [drift_blocked_outside(config.node_image.maintenance_window), {"nodes": "20%"}],
        },
    }


def drift_blocked_outside(window: MaintenanceWindow) -> dict[str, Any]:
    """A budget of 0 drifted nodes active for the rest of the week after the window: Karpenter applies the most
    restrictive active budget, so drifted nodes are replaced only inside the window (karpenter.sh docs v1.14,
    Disruption, "Schedule" and "Duration": cron in UTC, duration in h/m)."""
    end = CRON_DAYS.index(window.day) * 24 + window.start_hour + window.hours
    day, hour = divmod(end % WEEK_HOURS, 24)
    return {"nodes": "0", "reasons": ["Drifted"], "schedule": f"0 {hour} * * {day}",
            "duration": f"{WEEK_HOURS - window.hours}h"}


@dataclass(frozen=True)
class PartitionNodesArgs:
    partition_name: str
    partition: NodeGroup
    config: ClusterConfig
    cluster_name: str
    node_role_name: pulumi.Input[str]
    provider: k8s.Provider
    depends_on: list[pulumi.Resource]
    # A Kubernetes pool's labels and taints (pool_kind); None: a Slurm partition's.
    kind: NodeKind | None = None


class PartitionNodes(pulumi.ComponentResource):
    """The nodes of one Slurm partition or Kubernetes pool: a placement group for EFA, an EC2NodeClass and a
    NodePool."""

    node_pool: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: PartitionNodesArgs, opts: pulumi.ResourceOptions | None = None,
                 resource_type: str = "slurm-eks:index:PartitionNodes") -> None:
        super().__init__(resource_type, name, None, opts)
        p, pname = args.partition, args.partition_name
        kind = args.kind or partition_kind(pname, p)
        placement: pulumi.Output[str] | None = None
        # A cluster placement group shortens EFA paths; reserved capacity has its own placement (Capacity Blocks
        # need none: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html).
        if p.efa and not p.reserved:
            group = aws.ec2.PlacementGroup(f"{name}-pg", name=f"{args.cluster_name}-{pname}", strategy="cluster",
                                           opts=pulumi.ResourceOptions(parent=self))
            placement = group.name
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        node_class = k8s.apiextensions.CustomResource(
            f"{name}-nodeclass", api_version=KARPENTER_NODE_API, kind="EC2NodeClass",
            metadata={"name": pname},
            spec=node_class_spec(pname, p, args.config, args.cluster_name, args.node_role_name, placement, kind.tag),
            opts=k8s_opts)
        self.node_pool = k8s.apiextensions.CustomResource(
            f"{name}-nodepool", api_version=NODEPOOL_API, kind="NodePool", metadata={"name": pname},
            spec=node_pool_spec(pname, p, args.config, kind),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[*args.depends_on, node_class]))
        self.register_outputs({"nodePool": pname})


class PoolNodes(PartitionNodes):
    """The nodes of one Kubernetes pool: the partitions' builder with the pool's labels and taints."""

    def __init__(self, name: str, args: PartitionNodesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        kind = pool_kind(args.partition_name, args.partition)
        super().__init__(name, replace(args, kind=kind), opts,
                         resource_type="slurm-eks:index:PoolNodes")
