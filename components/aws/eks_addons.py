"""The EKS add-ons the cluster installs, each at a pinned version, and the VPC CNI's own IAM role.

A version left to EKS moves with every `pulumi up` that recreates an add-on (pulumi-eks looks kube-proxy's up
with `mostRecent: true`), so each one is pinned, in the one table of components/config/addon_versions.py.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.config.addon_versions import addon_version

# The VPC CNI's DaemonSet runs as kube-system/aws-node (amazon-vpc-cni-k8s charts/aws-vpc-cni values.yaml,
# serviceAccount.name); its IRSA role is what docs.aws.amazon.com/eks/latest/userguide/cni-iam-role.html sets up.
CNI_NAMESPACE = "kube-system"
CNI_SERVICE_ACCOUNT = "aws-node"
# Network policy enforcement by the VPC CNI's node agent: the add-on's configuration value
# `enableNetworkPolicy: "true"` (a string in the add-on's configuration schema;
# docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html).
CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}


# What the VPC CNI does to EC2 (aws/amazon-vpc-cni-k8s docs/iam-policy.md, "Scope-down IAM policy per EKS cluster"),
# confined to this cluster: its network interfaces, subnets and security groups by the VPC (ec2:Vpc), its instances by
# the tag every one of them carries (kubernetes.io/cluster/<name>: owned; Karpenter's own policy requires it on
# every launch, components/compute/karpenter.py, and the managed node groups' launch template sets it,
# components/aws/eks.py). Upstream scopes the interfaces by the cluster.k8s.amazonaws.com/name tag instead, which
# needs CLUSTER_NAME set on aws-node; whether the EKS add-on's configuration admits that variable could not be
# checked offline, so the VPC bounds them here (AmazonEKS_CNI_Policy, which this replaces, allows every ENI of the
# account). The actions are the managed policy's, DescribeSecurityGroups included as upstream's generic one lists it.
CNI_READS = ("DescribeInstances", "DescribeTags", "DescribeNetworkInterfaces", "DescribeSubnets",
             "DescribeSecurityGroups", "DescribeInstanceTypes")
CNI_ENI_ACTIONS = ("DeleteNetworkInterface", "UnassignPrivateIpAddresses", "AssignPrivateIpAddresses",
                   "AttachNetworkInterface", "DetachNetworkInterface", "ModifyNetworkInterfaceAttribute")
CNI_INSTANCE_ACTIONS = ("AttachNetworkInterface", "DetachNetworkInterface", "ModifyNetworkInterfaceAttribute")
CLUSTER_TAG = "kubernetes.io/cluster/{}"


def cni_policy(partition: str, cluster_name: str, vpc_id: str) -> dict[str, object]:
    def arn(kind: str) -> str:
        return f"arn:{partition}:ec2:*:*:{kind}"

    in_vpc = {"ArnEquals": {"ec2:Vpc": arn(f"vpc/{vpc_id}")}}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "Read", "Effect": "Allow", "Action": [f"ec2:{a}" for a in CNI_READS], "Resource": "*"},
        {"Sid": "TagInterfaces", "Effect": "Allow", "Action": "ec2:CreateTags", "Resource": arn("network-interface/*")},
        # CreateNetworkInterface is authorized on the new interface and on its subnet and security groups: the
        # latter confine it to this VPC.
        {"Sid": "CreateInterfaces", "Effect": "Allow", "Action": "ec2:CreateNetworkInterface",
         "Resource": arn("network-interface/*")},
        {"Sid": "CreateInThisVpc", "Effect": "Allow", "Action": "ec2:CreateNetworkInterface",
         "Resource": [arn("subnet/*"), arn("security-group/*")], "Condition": in_vpc},
        {"Sid": "ThisVpcsInterfaces", "Effect": "Allow", "Action": [f"ec2:{a}" for a in CNI_ENI_ACTIONS],
         "Resource": arn("network-interface/*"), "Condition": in_vpc},
        {"Sid": "ThisClustersInstances", "Effect": "Allow", "Action": [f"ec2:{a}" for a in CNI_INSTANCE_ACTIONS],
         "Resource": arn("instance/*"),
         "Condition": {"StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG.format(cluster_name)}": "owned"}}},
        {"Sid": "InterfaceSecurityGroups", "Effect": "Allow", "Action": "ec2:ModifyNetworkInterfaceAttribute",
         "Resource": arn("security-group/*"), "Condition": in_vpc},
    ]}


def vpc_cni(name: str, cluster_name: pulumi.Input[str], kubernetes_version: str, role: aws.iam.Role,
            vpc_id: pulumi.Input[str], opts: pulumi.ResourceOptions) -> aws.eks.Addon:
    """The VPC CNI add-on with its policy (cni_policy) on `role` (IRSA for kube-system/aws-node), never on the
    nodes."""
    partition = aws.get_partition_output().partition
    document = pulumi.Output.all(partition, cluster_name, vpc_id).apply(
        lambda a: json.dumps(cni_policy(a[0], a[1], a[2])))
    policy = aws.iam.RolePolicy(f"{name}-ec2", role=role.id, policy=document, opts=opts)
    return aws.eks.Addon(
        name, cluster_name=cluster_name, addon_name="vpc-cni",
        addon_version=addon_version(kubernetes_version, "vpc-cni"),
        service_account_role_arn=role.arn, configuration_values=json.dumps(CNI_CONFIGURATION),
        # EKS installs a self-managed aws-node with the cluster; the add-on takes it over.
        resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="OVERWRITE",
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])))
