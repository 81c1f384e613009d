"""The EKS add-ons the cluster installs, each at a pinned version, and the VPC CNI's own IAM role.

A version left to EKS moves with every `pulumi up` that recreates an add-on (pulumi-eks looks kube-proxy's up
with `mostRecent: true`), so each one is pinned, in the one table of components/config/addon_versions.py.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.aws.iam import CNI_POLICY, managed_policy_arn
from components.config.addon_versions import addon_version

# The VPC CNI's DaemonSet runs as kube-system/aws-node (amazon-vpc-cni-k8s charts/aws-vpc-cni values.yaml,
# serviceAccount.name); its IRSA role is what docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html sets up.
CNI_NAMESPACE = "kube-system"
CNI_SERVICE_ACCOUNT = "aws-node"
# Network policy enforcement by the VPC CNI's node agent: the add-on's configuration value
# `enableNetworkPolicy: "true"` (a string in the add-on's configuration schema;
# docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html).
CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}


def vpc_cni(name: str, cluster_name: pulumi.Input[str], kubernetes_version: str, role: aws.iam.Role,
            opts: pulumi.ResourceOptions) -> aws.eks.Addon:
    """The VPC CNI add-on with the CNI policy on `role` (IRSA for kube-system/aws-node), never on the nodes."""
    partition = aws.get_partition_output().partition
    attachment = aws.iam.RolePolicyAttachment(
        f"{name}-{CNI_POLICY}", role=role.name, policy_arn=partition.apply(lambda p: managed_policy_arn(p, CNI_POLICY)),
        opts=opts)
    return aws.eks.Addon(
        name, cluster_name=cluster_name, addon_name="vpc-cni",
        addon_version=addon_version(kubernetes_version, "vpc-cni"),
        service_account_role_arn=role.arn, configuration_values=json.dumps(CNI_CONFIGURATION),
        # EKS installs a self-managed aws-node with the cluster; the add-on takes it over.
        resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[attachment])))
