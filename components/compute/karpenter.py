"""Karpenter: the controller (IAM, interruption queue, Helm chart) and the role its nodes run as.

The controller authenticates with IRSA: the cluster already has an OIDC provider, so this needs no
Pod Identity agent add-on, and the trust policy pins the exact service account.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.aws.iam import Scope, aws_scope, node_role
from components.aws.vpc import DISCOVERY_TAG
from components.kubernetes.handover import helm_release

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
        # The name is a plain string: without the dependency the entry races the cluster it names.
        aws.eks.AccessEntry(f"{name}-node", cluster_name=cluster_name, principal_arn=self.node_role.arn,
                            type="EC2_LINUX",
                            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster.cluster]))
        # Karpenter's nodes join the EKS-managed cluster security group, found by the discovery tag.
        aws.ec2.Tag(f"{name}-cluster-sg-discovery", resource_id=args.cluster.cluster_security_group_id,
                    key=DISCOVERY_TAG, value=cluster_name, opts=child)
        queue = self._interruption_queue(name, cluster_name, child)
        controller = self._controller_role(name, args, queue, child)
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.cluster.provider)
        # CRDs from their own chart: Helm never upgrades a chart's crds/ directory, this chart it does.
        self.crds = helm_release(  # Argo CD's in gitops mode (components/kubernetes/handover.py)
            f"{name}-crd", name="karpenter-crd", chart=CRD_CHART, version=VERSION, namespace=NAMESPACE,
            opts=k8s_opts)
        self.release = helm_release(  # Argo CD's in gitops mode (components/kubernetes/handover.py)
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
        policy = pulumi.Output.all(aws_scope(args.region), queue.arn, self.node_role.arn).apply(
            lambda a: json.dumps(controller_policy(a[0], args.cluster.name, a[1], a[2])))
        aws.iam.RolePolicy(f"{name}-controller", role=role.id, policy=policy, opts=child)
        return role


# Upstream's controller IAM, which each statement below repeats with its Sid: aws/karpenter-provider-aws
# website/content/en/v1.14/getting-started/getting-started-with-karpenter/cloudformation.yaml at 1d927085d
# (the docs of v1.14.1; ../shared/upstream/karpenter/cloudformation-v1.14.yaml). Its five policies are one
# inline document here (under 8 KB even for a 100-character cluster name, of the 10,240 characters a role's
# inline policies may hold). ZonalShiftPolicy is
# left out: Karpenter calls arc-zonal-shift only with ENABLE_ZONAL_SHIFT, off by default
# (pkg/operator/options/options.go at v1.14.1).
CLUSTER_TAG = "kubernetes.io/cluster/{}"
EKS_CLUSTER_TAG = "eks:eks-cluster-name"
NODEPOOL_TAG = "karpenter.sh/nodepool"
NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
REGION_TAG = "topology.kubernetes.io/region"
TAGGED_ON_LAUNCH = ("fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request")
REGIONAL_READS = ("DescribeCapacityReservations", "DescribeImages", "DescribeInstances", "DescribeInstanceStatus",
                  "DescribeInstanceTypeOfferings", "DescribeInstanceTypes", "DescribeLaunchTemplates",
                  "DescribePlacementGroups", "DescribeSecurityGroups", "DescribeSpotPriceHistory", "DescribeSubnets")


def controller_policy(scope: Scope, cluster: str, queue_arn: str, node_role_arn: str) -> dict[str, Any]:
    """Karpenter 1.14's controller policy for this cluster, as upstream scopes it."""
    def ec2(kind: str) -> str:
        return scope.arn("ec2", f"{kind}/*", account="*")

    request, resource = "aws:RequestTag", "aws:ResourceTag"

    def owned(prefix: str) -> dict[str, str]:
        return {f"{prefix}/{CLUSTER_TAG.format(cluster)}": "owned"}

    nodepool = {"StringLike": {f"{resource}/{NODEPOOL_TAG}": "*"}}
    profile = scope.arn("iam", "instance-profile/*", region="")
    launched = [ec2(kind) for kind in TAGGED_ON_LAUNCH]
    launch_tags = {**owned(request), f"{request}/{EKS_CLUSTER_TAG}": cluster}
    profile_request_tags = {**launch_tags, f"{request}/{REGION_TAG}": scope.region}
    profile_resource_tags = {**owned(resource), f"{resource}/{REGION_TAG}": scope.region}
    return {"Version": "2012-10-17", "Statement": [
        # KarpenterControllerNodeLifecyclePolicy
        {"Sid": "AllowScopedEC2InstanceAccessActions", "Effect": "Allow",
         "Resource": [scope.arn("ec2", "image/*", account=""), scope.arn("ec2", "snapshot/*", account=""),
                      ec2("security-group"), ec2("subnet"), ec2("capacity-reservation"), ec2("placement-group")],
         "Action": ["ec2:RunInstances", "ec2:CreateFleet"]},
        {"Sid": "AllowScopedEC2LaunchTemplateAccessActions", "Effect": "Allow", "Resource": ec2("launch-template"),
         "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
         "Condition": {"StringEquals": owned(resource), **nodepool}},
        {"Sid": "AllowScopedEC2InstanceActionsWithTags", "Effect": "Allow", "Resource": launched,
         "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
         "Condition": {"StringEquals": launch_tags, "StringLike": {f"{request}/{NODEPOOL_TAG}": "*"}}},
        {"Sid": "AllowScopedResourceCreationTagging", "Effect": "Allow", "Resource": launched,
         "Action": "ec2:CreateTags",
         "Condition": {"StringEquals": {**launch_tags,
                                        "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]},
                       "StringLike": {f"{request}/{NODEPOOL_TAG}": "*"}}},
        {"Sid": "AllowScopedResourceTagging", "Effect": "Allow", "Resource": ec2("instance"),
         "Action": "ec2:CreateTags",
         "Condition": {"StringEquals": owned(resource), **nodepool,
                       "StringEqualsIfExists": {f"{request}/{EKS_CLUSTER_TAG}": cluster},
                       "ForAllValues:StringEquals": {"aws:TagKeys": [EKS_CLUSTER_TAG, "karpenter.sh/nodeclaim",
                                                                     "Name"]}}},
        {"Sid": "AllowScopedDeletion", "Effect": "Allow", "Resource": [ec2("instance"), ec2("launch-template")],
         "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
         "Condition": {"StringEquals": owned(resource), **nodepool}},
        # KarpenterControllerIAMIntegrationPolicy
        {"Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Resource": node_role_arn, "Action": "iam:PassRole",
         "Condition": {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}}},
        {"Sid": "AllowScopedInstanceProfileCreationActions", "Effect": "Allow", "Resource": profile,
         "Action": ["iam:CreateInstanceProfile"],
         "Condition": {"StringEquals": profile_request_tags,
                       "StringLike": {f"{request}/{NODECLASS_TAG}": "*"}}},
        {"Sid": "AllowScopedInstanceProfileTagActions", "Effect": "Allow", "Resource": profile,
         "Action": ["iam:TagInstanceProfile"],
         "Condition": {"StringEquals": {**profile_resource_tags, **profile_request_tags},
                       "StringLike": {f"{resource}/{NODECLASS_TAG}": "*", f"{request}/{NODECLASS_TAG}": "*"}}},
        {"Sid": "AllowScopedInstanceProfileActions", "Effect": "Allow", "Resource": profile,
         "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
         "Condition": {"StringEquals": profile_resource_tags,
                       "StringLike": {f"{resource}/{NODECLASS_TAG}": "*"}}},
        # KarpenterControllerEKSIntegrationPolicy
        {"Sid": "AllowAPIServerEndpointDiscovery", "Effect": "Allow",
         "Resource": scope.arn("eks", f"cluster/{cluster}"), "Action": "eks:DescribeCluster"},
        # KarpenterControllerInterruptionPolicy
        {"Sid": "AllowInterruptionQueueActions", "Effect": "Allow", "Resource": queue_arn,
         "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]},
        # KarpenterControllerResourceDiscoveryPolicy
        {"Sid": "AllowRegionalReadActions", "Effect": "Allow", "Resource": "*",
         "Action": [f"ec2:{action}" for action in REGIONAL_READS],
         "Condition": {"StringEquals": {"aws:RequestedRegion": scope.region}}},
        {"Sid": "AllowSSMReadActions", "Effect": "Allow",
         "Resource": scope.arn("ssm", "parameter/aws/service/*", account=""), "Action": "ssm:GetParameter"},
        {"Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts"},
        # IAM authorizes ListInstanceProfiles on `*` only: scoped to instance-profile/* it is always denied.
        {"Sid": "AllowUnscopedInstanceProfileListAction", "Effect": "Allow", "Resource": "*",
         "Action": "iam:ListInstanceProfiles"},
        {"Sid": "AllowInstanceProfileReadActions", "Effect": "Allow", "Resource": profile,
         "Action": "iam:GetInstanceProfile"},
    ]}
