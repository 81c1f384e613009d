"""One Karpenter EC2NodeClass + NodePool per Slurm partition, generated from the config and the catalog.

Nodes exist only while Slurm has work for them: the NodePool consolidates a node only when it is empty
(after `idleTimeout`) and never expires it. Every node runs the pinned AL2023 release (`nodeImage.release`);
a new pin makes nodes drift, and Karpenter replaces drifted nodes only inside `nodeImage.maintenanceWindow`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import catalog
from components.config import ClusterConfig, MaintenanceWindow, Partition
from components.network import DISCOVERY_TAG
from components.scheduling import DEVICE_RESOURCES, node_labels, node_taints, partition_instance

# Karpenter v1 alias `<family>@<version>`, the version an AMI release tag such as v20260714
# (karpenter.sh docs v1.14, EC2NodeClasses, amiSelectorTerms "alias"): it picks the NVIDIA or Neuron AL2023
# variant of that release per instance type.
AMI_FAMILY = "al2023"
WEEK_HOURS = 7 * 24
CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # cron day-of-week 0-6
ROOT_VOLUME_GIB = 200  # images and logs; containerd's data lives on the instance-store RAID0
KARPENTER_NODE_API = "karpenter.k8s.aws/v1"
NODEPOOL_API = "karpenter.sh/v1"


def node_class_spec(name: str, partition: Partition, config: ClusterConfig, cluster_name: str,
                    role: pulumi.Input[str], placement_group: pulumi.Input[str] | None) -> dict[str, Any]:
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
        "tags": {"slurm-eks:partition": name, **config.tags},
    }
    if placement_group is not None:
        spec["placementGroupSelector"] = {"name": placement_group}
    if partition.capacity_reservation_ids:
        spec["capacityReservationSelectorTerms"] = [{"id": cr} for cr in partition.capacity_reservation_ids]
    return spec


def node_pool_spec(name: str, partition: Partition, config: ClusterConfig) -> dict[str, Any]:
    instance = partition_instance(partition)
    types = [catalog.lookup(t) for t in partition.instance_types]
    requirements: list[dict[str, Any]] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(partition.instance_types)},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [partition.capacity_type]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    if partition.efa:
        # EFA traffic stays inside one zone: every node of the partition lands in it.
        requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In",
                             "values": [config.network.efa_availability_zone]})
    limits = {"cpu": str(partition.max_nodes * max(t.vcpu for t in types)),
              "memory": f"{partition.max_nodes * max(t.memory_gib for t in types)}Gi"}
    device = DEVICE_RESOURCES.get(instance.accelerator)
    if device:
        limits[device] = str(partition.max_nodes * instance.accelerators)
    return {
        "template": {
            "metadata": {"labels": node_labels(name, instance)},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
                "requirements": requirements,
                "taints": node_taints(instance),
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
    partition: Partition
    config: ClusterConfig
    cluster_name: str
    node_role_name: pulumi.Input[str]
    provider: k8s.Provider
    depends_on: list[pulumi.Resource]


class PartitionNodes(pulumi.ComponentResource):
    """The nodes of one Slurm partition: a placement group for EFA, an EC2NodeClass and a NodePool."""

    node_pool: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: PartitionNodesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:PartitionNodes", name, None, opts)
        p, pname = args.partition, args.partition_name
        placement: pulumi.Output[str] | None = None
        # A cluster placement group shortens EFA paths; reserved capacity has its own placement.
        if p.efa and p.capacity_type != "reserved":
            group = aws.ec2.PlacementGroup(f"{name}-pg", name=f"{args.cluster_name}-{pname}", strategy="cluster",
                                           opts=pulumi.ResourceOptions(parent=self))
            placement = group.name
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=args.depends_on)
        node_class = k8s.apiextensions.CustomResource(
            f"{name}-nodeclass", api_version=KARPENTER_NODE_API, kind="EC2NodeClass",
            metadata={"name": pname},
            spec=node_class_spec(pname, p, args.config, args.cluster_name, args.node_role_name, placement),
            opts=k8s_opts)
        self.node_pool = k8s.apiextensions.CustomResource(
            f"{name}-nodepool", api_version=NODEPOOL_API, kind="NodePool", metadata={"name": pname},
            spec=node_pool_spec(pname, p, args.config),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[*args.depends_on, node_class]))
        self.register_outputs({"nodePool": pname})
