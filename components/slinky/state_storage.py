"""Encrypted gp3 volumes for the Slurm daemons' state (slurmctld save-state, an in-cluster MariaDB).

EKS does not install the EBS CSI driver: it comes here as the EKS add-on, with an IRSA role.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.aws.iam import Scope, aws_scope

STATE_STORAGE_CLASS = "slurm-state-gp3"


@dataclass(frozen=True)
class StateStorageArgs:
    cluster: EksCluster
    cluster_name: str


class StateStorage(pulumi.ComponentResource):
    """`storage_class` names a StorageClass of encrypted gp3 volumes that are retained when their claim goes."""

    storage_class: pulumi.Output[str]
    ready: pulumi.Resource  # the StorageClass: what a claim on it waits for

    def __init__(self, name: str, args: StateStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:StateStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = args.cluster.irsa_role(f"{name}-ebs-csi", "kube-system", "ebs-csi-controller-sa", child)
        policy = aws_scope(aws.get_region_output().region).apply(lambda s: json.dumps(ebs_csi_policy(s)))
        permissions = aws.iam.RolePolicy(f"{name}-ebs-csi", role=role.id, policy=policy, opts=child)
        addon = aws.eks.Addon(
            f"{name}-ebs-csi", cluster_name=args.cluster_name, addon_name="aws-ebs-csi-driver",
            service_account_role_arn=role.arn, resolve_conflicts_on_create="OVERWRITE",
            configuration_values=json.dumps({"controller": {"nodeSelector": SYSTEM_NODE_SELECTOR}}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster, permissions]))
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3", metadata={"name": STATE_STORAGE_CLASS}, provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true", "csi.storage.k8s.io/fstype": "ext4"},
            # Retain: deleting a claim by mistake must not delete Slurm's state with it.
            reclaim_policy="Retain", volume_binding_mode="WaitForFirstConsumer", allow_volume_expansion=True,
            opts=pulumi.ResourceOptions(parent=self, provider=args.cluster.provider, depends_on=[addon]))
        self.storage_class, self.ready = storage_class.metadata.name, storage_class
        self.register_outputs({"storageClass": self.storage_class})


# The driver's documented policy, statement by statement with its Sids: kubernetes-sigs/aws-ebs-csi-driver
# docs/AmazonEBSCSIDriverPolicyV2.json at v1.64.0 (docs/install.md: "the example policy", the source of the
# AWS-managed AmazonEBSCSIDriverPolicyV2). It already limits every write to volumes and snapshots the
# driver tagged `ebs.csi.aws.com/cluster=true` (or, for migrated in-tree volumes, created for a claim);
# here its `arn:aws:ec2:*:*:` becomes this partition, region and account (snapshots have none in their
# ARN), and its reads this region.
# The same release's EKS-cluster-scoped policy keys on the `ebs.csi.aws.com/cluster-name` tag, which the
# driver writes only when run with --k8s-tag-cluster-id: nothing checkable offline says the EKS add-on does.
# The add-on is not pinned (EKS installs its default version: its versions are listed only by the EKS API,
# `aws eks describe-addon-versions`, unreachable offline; the policy pack waives `eks-addon-pinned` for it in
# policy/config/<stack>.json until one is pinned): v1.64.0 is the driver release read here.
MANAGED_TAG = "ebs.csi.aws.com/cluster"  # "true" on every volume and snapshot the driver creates
CLAIM_TAG = "kubernetes.io/created-for/pvc/name"  # on volumes the in-tree plugin created


def ebs_csi_policy(scope: Scope) -> dict[str, Any]:
    volume, instance = scope.arn("ec2", "volume/*"), scope.arn("ec2", "instance/*")
    snapshot = scope.arn("ec2", "snapshot/*", account="")  # a snapshot's ARN has no account
    managed = {"StringEquals": {f"ec2:ResourceTag/{MANAGED_TAG}": "true"}}
    migrated = {"StringLike": {f"ec2:ResourceTag/{CLAIM_TAG}": "*"}}
    tagged_on_create = {"StringEquals": {f"aws:RequestTag/{MANAGED_TAG}": "true"}}
    manage = ["ec2:ModifyVolume", "ec2:AttachVolume", "ec2:DetachVolume", "ec2:DeleteVolume"]

    def allow(sid: str, action: list[str], resource: str | list[str], condition: dict[str, Any] | None = None,
              ) -> dict[str, Any]:
        return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource,
                **({"Condition": condition} if condition else {})}

    return {"Version": "2012-10-17", "Statement": [
        allow("ReadOnlyDescribeOperations",
              ["ec2:DescribeAvailabilityZones", "ec2:DescribeInstances", "ec2:DescribeInstanceTypes",
               "ec2:DescribeSnapshots", "ec2:DescribeVolumes", "ec2:DescribeVolumesModifications",
               "ec2:DescribeVolumeStatus"], "*", {"StringEquals": {"aws:RequestedRegion": scope.region}}),
        allow("CreateAndCopyVolumesWithManagedTag", ["ec2:CreateVolume", "ec2:CopyVolumes"], volume, tagged_on_create),
        allow("CopyManagedVolumes", ["ec2:CopyVolumes"], scope.arn("ec2", "volume/vol-*"), managed),
        allow("CopyCSIMigratedVolumes", ["ec2:CopyVolumes"], scope.arn("ec2", "volume/vol-*"), migrated),
        allow("CreateSnapshotsWithManagedTag", ["ec2:CreateSnapshot"], snapshot, tagged_on_create),
        allow("CreateSnapshotsFromManagedVolumes", ["ec2:CreateSnapshot"], volume, managed),
        allow("ManageManagedVolumes", manage, volume, managed),
        allow("ManageCSIMigratedVolumes", manage, volume, migrated),
        allow("CreateVolumesFromAndEnableFSROnManagedSnapshots", ["ec2:CreateVolume", "ec2:EnableFastSnapshotRestores"],
              snapshot, managed),
        allow("AttachDetachVolumesToAnyInstance", ["ec2:AttachVolume", "ec2:DetachVolume"], instance),
        allow("DeleteAndLockManagedSnapshots", ["ec2:DeleteSnapshot", "ec2:LockSnapshot"], snapshot, managed),
        allow("TagResourcesOnCreation", ["ec2:CreateTags"], [volume, snapshot],
              {"StringEquals": {"ec2:CreateAction": ["CreateVolume", "CreateSnapshot", "CopyVolumes"]}}),
        allow("ModifyTagsOnManagedVolumes", ["ec2:CreateTags", "ec2:DeleteTags"], volume,
              {**managed, "Null": {"aws:TagKeys": "false"}, "ForAllValues:StringNotEquals": {
                  "aws:TagKeys": [MANAGED_TAG, "ebs.csi.aws.com/cluster-name", CLAIM_TAG]}}),
    ]}
