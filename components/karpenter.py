"""Karpenter: the controller (IAM, interruption queue, Helm chart) and the role its nodes run as.

The controller authenticates with IRSA: the cluster already has an OIDC provider, so this needs no
Pod Identity agent add-on, and the trust policy pins the exact service account.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.cluster import SYSTEM_NODE_SELECTOR, EksCluster, node_role
from components.network import DISCOVERY_TAG

CHART = "oci://public.ecr.aws/karpenter/karpenter"
CRD_CHART = "oci://public.ecr.aws/karpenter/karpenter-crd"
VERSION = "1.14.1"
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = "karpenter"

# What EventBridge forwards to the interruption queue, so Karpenter drains a node before EC2 takes it.
INTERRUPTION_EVENTS = {
    "health": ("aws.health", "AWS Health Event"),
    "spot-interruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
    "reservation-interruption": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}


@dataclass(frozen=True)
class KarpenterArgs:
    cluster: EksCluster
    region: str


class Karpenter(pulumi.ComponentResource):
    node_role: aws.iam.Role
    crds: k8s.helm.v3.Release
    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_name = args.cluster.name
        self.node_role = node_role(f"{name}-node", child)
        aws.eks.AccessEntry(f"{name}-node", cluster_name=cluster_name, principal_arn=self.node_role.arn,
                            type="EC2_LINUX", opts=child)
        # Karpenter's nodes join the EKS-managed cluster security group, found by the discovery tag.
        aws.ec2.Tag(f"{name}-cluster-sg-discovery", resource_id=args.cluster.cluster_security_group_id,
                    key=DISCOVERY_TAG, value=cluster_name, opts=child)
        queue = self._interruption_queue(name, cluster_name, child)
        controller = self._controller_role(name, args, queue, child)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.cluster.provider)
        # CRDs from their own chart: Helm never upgrades a chart's crds/ directory, this chart it does.
        self.crds = k8s.helm.v3.Release(
            f"{name}-crd", name="karpenter-crd", chart=CRD_CHART, version=VERSION, namespace=NAMESPACE,
            opts=k8s_opts)
        self.release = k8s.helm.v3.Release(
            name, name="karpenter", chart=CHART, version=VERSION, namespace=NAMESPACE, skip_crds=True,
            values={
                "settings": {"clusterName": cluster_name, "interruptionQueue": queue.name},
                "serviceAccount": {"name": SERVICE_ACCOUNT,
                                   "annotations": {"eks.amazonaws.com/role-arn": controller.arn}},
                "replicas": 2,
                # Never on nodes Karpenter manages (the chart's default affinity also says so).
                "nodeSelector": SYSTEM_NODE_SELECTOR,
                "controller": {"resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                             "limits": {"memory": "1Gi"}}},
            },
            opts=pulumi.ResourceOptions(parent=self, provider=args.cluster.provider, depends_on=[self.crds]))
        self.register_outputs({"nodeRoleName": self.node_role.name, "interruptionQueue": queue.name})

    def _interruption_queue(self, name: str, cluster_name: str, child: pulumi.ResourceOptions) -> aws.sqs.Queue:
        queue = aws.sqs.Queue(f"{name}-interruption", name=f"{cluster_name}-karpenter",
                              message_retention_seconds=300, sqs_managed_sse_enabled=True, opts=child)
        aws.sqs.QueuePolicy(f"{name}-interruption", queue_url=queue.url, policy=queue.arn.apply(lambda arn: json.dumps({
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "EventBridge", "Effect": "Allow",
                 "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                 "Action": "sqs:SendMessage", "Resource": arn},
                {"Sid": "DenyHTTP", "Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": arn,
                 "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
            ]})), opts=child)
        for key, (source, detail_type) in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{key}", description=f"{detail_type} -> Karpenter ({cluster_name})",
                event_pattern=json.dumps({"source": [source], "detail-type": [detail_type]}), opts=child)
            aws.cloudwatch.EventTarget(f"{name}-{key}", rule=rule.name, arn=queue.arn, opts=child)
        return queue

    def _controller_role(self, name: str, args: KarpenterArgs, queue: aws.sqs.Queue,
                         child: pulumi.ResourceOptions) -> aws.iam.Role:
        role = args.cluster.irsa_role(f"{name}-controller", NAMESPACE, SERVICE_ACCOUNT, child)
        policy = pulumi.Output.all(queue.arn, self.node_role.arn, aws.get_caller_identity_output().account_id).apply(
            lambda a: json.dumps(controller_policy(args.cluster.name, args.region, a[2], a[0], a[1])))
        aws.iam.RolePolicy(f"{name}-controller", role=role.id, policy=policy, opts=child)
        return role


def controller_policy(cluster: str, region: str, account: str, queue_arn: str, node_role_arn: str) -> dict:
    """Karpenter's controller policy (its getting-started CloudFormation), scoped to this cluster's tags."""
    ec2 = f"arn:aws:ec2:{region}"
    owned = {f"aws:RequestTag/kubernetes.io/cluster/{cluster}": "owned"}
    resource_owned = {f"aws:ResourceTag/kubernetes.io/cluster/{cluster}": "owned"}
    launched = [f"{ec2}:*:{kind}/*" for kind in ("fleet", "instance", "volume", "network-interface", "launch-template")]
    profile_tags = {"aws:RequestTag/topology.kubernetes.io/region": region, **owned}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowScopedEC2InstanceActions", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
         "Resource": [f"{ec2}::image/*", f"{ec2}::snapshot/*", f"{ec2}:*:spot-instances-request/*",
                      f"{ec2}:*:security-group/*", f"{ec2}:*:subnet/*", f"{ec2}:*:launch-template/*",
                      f"{ec2}:*:capacity-reservation/*", f"{ec2}:*:placement-group/*"]},
        {"Sid": "AllowScopedEC2InstanceActionsWithTags", "Effect": "Allow",
         "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"], "Resource": launched,
         "Condition": {"StringEquals": owned, "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedResourceCreationTagging", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": launched,
         "Condition": {"StringEquals": {**owned, "ec2:CreateAction": ["RunInstances", "CreateFleet",
                                                                      "CreateLaunchTemplate"]},
                       "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowScopedResourceTagging", "Effect": "Allow", "Action": "ec2:CreateTags",
         "Resource": f"{ec2}:*:instance/*",
         "Condition": {"StringEquals": resource_owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                       "ForAllValues:StringEquals": {"aws:TagKeys": ["karpenter.sh/nodeclaim", "Name"]}}},
        {"Sid": "AllowScopedDeletion", "Effect": "Allow",
         "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
         "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
         "Condition": {"StringEquals": resource_owned, "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"}}},
        {"Sid": "AllowRegionalReadActions", "Effect": "Allow", "Resource": "*",
         "Action": ["ec2:DescribeAvailabilityZones", "ec2:DescribeCapacityReservations", "ec2:DescribeImages",
                    "ec2:DescribeInstances", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"],
         "Condition": {"StringEquals": {"aws:RequestedRegion": region}}},
        {"Sid": "AllowSSMReadActions", "Effect": "Allow", "Action": "ssm:GetParameter",
         "Resource": f"arn:aws:ssm:{region}::parameter/aws/service/*"},
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Action": "pricing:GetProducts", "Resource": "*"},
        {"Sid": "AllowInterruptionQueueActions", "Effect": "Allow", "Resource": queue_arn,
         "Action": ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]},
        {"Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Action": "iam:PassRole", "Resource": node_role_arn,
         "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
        {"Sid": "AllowScopedInstanceProfileCreationActions", "Effect": "Allow", "Action": "iam:CreateInstanceProfile",
         "Resource": f"arn:aws:iam::{account}:instance-profile/*",
         "Condition": {"StringEquals": profile_tags, "StringLike": {"aws:RequestTag/karpenter.sh/nodeclass": "*"}}},
        {"Sid": "AllowScopedInstanceProfileTagActions", "Effect": "Allow", "Action": "iam:TagInstanceProfile",
         "Resource": f"arn:aws:iam::{account}:instance-profile/*",
         "Condition": {"StringEquals": {**profile_tags, **resource_owned,
                                        "aws:ResourceTag/topology.kubernetes.io/region": region},
                       "StringLike": {"aws:ResourceTag/karpenter.sh/nodeclass": "*",
                                      "aws:RequestTag/karpenter.sh/nodeclass": "*"}}},
        {"Sid": "AllowScopedInstanceProfileActions", "Effect": "Allow",
         "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
         "Resource": f"arn:aws:iam::{account}:instance-profile/*",
         "Condition": {"StringEquals": {**resource_owned, "aws:ResourceTag/topology.kubernetes.io/region": region},
                       "StringLike": {"aws:ResourceTag/karpenter.sh/nodeclass": "*"}}},
        {"Sid": "AllowInstanceProfileReadActions", "Effect": "Allow",
         "Action": ["iam:GetInstanceProfile", "iam:ListInstanceProfiles"],
         "Resource": f"arn:aws:iam::{account}:instance-profile/*"},
        {"Sid": "AllowAPIServerEndpointDiscovery", "Effect": "Allow", "Action": "eks:DescribeCluster",
         "Resource": f"arn:aws:eks:{region}:{account}:cluster/{cluster}"},
    ]}
