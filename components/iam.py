"""IAM the components share: trust policies, the EC2 node role, and ARNs in the deploying partition.

No ARN is written `arn:aws:`: the partition (`aws`, `aws-cn`, `aws-us-gov`) comes from the provider, as
upstream's CloudFormation takes it from `${AWS::Partition}`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

# AWS-managed policies every EKS node needs: kubelet, the VPC CNI, ECR pulls, SSM for break-glass access.
NODE_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)


@dataclass(frozen=True)
class Scope:
    """Where a policy applies: this partition, region and account."""

    partition: str
    region: str
    account: str

    def arn(self, service: str, resource: str, *, region: str | None = None, account: str | None = None) -> str:
        """`arn:<partition>:<service>:<region>:<account>:<resource>`, in this region and account unless told:
        global services (IAM) have no region, public images and parameters no account."""
        return (f"arn:{self.partition}:{service}:{self.region if region is None else region}:"
                f"{self.account if account is None else account}:{resource}")


def aws_scope(region: pulumi.Input[str]) -> pulumi.Output[Scope]:
    """The deploying credentials' partition and account, in `region`."""
    return pulumi.Output.all(aws.get_partition_output().partition, region,
                             aws.get_caller_identity_output().account_id).apply(lambda a: Scope(*a))


def managed_policy_arn(partition: str, name: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{name}"


def assume_role_policy(service: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})


def irsa_assume_role_policy(provider_arn: str, issuer_url: str, namespace: str, service_account: str) -> str:
    """Trust for exactly one Kubernetes service account through the cluster's OIDC provider (IRSA)."""
    issuer = issuer_url.removeprefix("https://")
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Federated": provider_arn}, "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                                       f"{issuer}:aud": "sts.amazonaws.com"}}}]})


def node_role(name: str, opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """An EC2 role with what every EKS node needs."""
    partition = aws.get_partition_output()
    # EC2's principal carries the partition's DNS suffix (amazonaws.com.cn in China), as upstream's
    # `ec2.${AWS::URLSuffix}` (Karpenter v1.14 cloudformation.yaml, KarpenterNodeRole).
    trust = partition.dns_suffix.apply(lambda suffix: assume_role_policy(f"ec2.{suffix}"))
    role = aws.iam.Role(name, assume_role_policy=trust, opts=opts)
    for policy in NODE_POLICIES:
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy}", role=role.name,
            policy_arn=partition.partition.apply(lambda p, policy=policy: managed_policy_arn(p, policy)), opts=opts)
    return role
