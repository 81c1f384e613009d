"""Encrypted gp3 volumes for the Slurm daemons' state (slurmctld save-state, an in-cluster MariaDB).

EKS does not install the EBS CSI driver: it comes here as the EKS add-on, with an IRSA role.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import SYSTEM_NODE_SELECTOR, EksCluster

EBS_CSI_POLICY = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
STATE_STORAGE_CLASS = "slurm-state-gp3"


@dataclass(frozen=True)
class StateStorageArgs:
    cluster: EksCluster
    cluster_name: str


class StateStorage(pulumi.ComponentResource):
    """`storage_class` names a StorageClass of encrypted gp3 volumes that are retained when their claim goes."""

    storage_class: pulumi.Output[str]

    def __init__(self, name: str, args: StateStorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:StateStorage", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role = args.cluster.irsa_role(f"{name}-ebs-csi", "kube-system", "ebs-csi-controller-sa", child)
        attachment = aws.iam.RolePolicyAttachment(f"{name}-ebs-csi", role=role.name, policy_arn=EBS_CSI_POLICY,
                                                  opts=child)
        addon = aws.eks.Addon(
            f"{name}-ebs-csi", cluster_name=args.cluster_name, addon_name="aws-ebs-csi-driver",
            service_account_role_arn=role.arn, resolve_conflicts_on_create="OVERWRITE",
            configuration_values=json.dumps({"controller": {"nodeSelector": SYSTEM_NODE_SELECTOR}}),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster, attachment]))
        storage_class = k8s.storage.v1.StorageClass(
            f"{name}-gp3", metadata={"name": STATE_STORAGE_CLASS}, provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true", "csi.storage.k8s.io/fstype": "ext4"},
            # Retain: deleting a claim by mistake must not delete Slurm's state with it.
            reclaim_policy="Retain", volume_binding_mode="WaitForFirstConsumer", allow_volume_expansion=True,
            opts=pulumi.ResourceOptions(parent=self, provider=args.cluster.provider, depends_on=[addon]))
        self.storage_class = storage_class.metadata.name
        self.register_outputs({"storageClass": self.storage_class})
