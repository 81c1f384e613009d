"""IAM the components share: trust policies, the EC2 node role, and ARNs in the deploying partition.

No ARN is written `arn:aws:`: the partition (`aws`, `aws-cn`, `aws-us-gov`) comes from the provider, as
upstream's CloudFormation takes it from `${AWS::Partition}`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

# The AWS-managed policies of every node role: the two the EKS user guide requires
# (docs.aws.amazon.com/eks/latest/userguide/create-node-role.html: kubelet's EC2 reads, ECR pulls), nothing
# else. Karpenter v1.14's KarpenterNodeRole (cloudformation.yaml, ../shared/upstream/karpenter) also attaches
# AmazonEKS_CNI_Policy and AmazonSSMManagedInstanceCore; we deliberately do not. Every process on a node can
# use its role, and the CNI policy lets it re-point any ENI's security groups
# (ec2:ModifyNetworkInterfaceAttribute on *): the VPC CNI gets its permissions on its own IRSA role, as that guide
# recommends, scoped to this cluster's VPC and instances (components/aws/eks_addons.py cni_policy). SSM would give
# anyone holding the node's credentials a remote shell channel.
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
# Nobody carries this one: the VPC CNI has a scoped copy (components/aws/eks_addons.py cni_policy).
CNI_POLICY = "AmazonEKS_CNI_Policy"


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


# The console's default key policy splits key administrators from key users
# (docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html, "Allows key administrators to
# administer the KMS key"): these are its administrator actions. None of them encrypts or decrypts.
KEY_ADMIN_ACTIONS = ["kms:Create*", "kms:Describe*", "kms:Enable*", "kms:List*", "kms:Put*", "kms:Update*",
                     "kms:Revoke*", "kms:Disable*", "kms:Get*", "kms:Delete*", "kms:TagResource",
                     "kms:UntagResource", "kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion",
                     "kms:RotateKeyOnDemand"]
# EKS envelope-encrypts Secrets through a grant it creates when the cluster is created
# (docs.aws.amazon.com/eks/latest/userguide/enable-kms.html); the key users' grant actions of the same
# default policy, held to AWS resources.
KEY_GRANT_ACTIONS = ["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"]


def secrets_key_policy(scope: Scope, dns_suffix: str, administrators: list[str]) -> dict[str, Any]:
    """The EKS Secrets key's policy: `administrators` manage the key and cannot use it; principals of this account
    use it only through EKS in this region (`kms:ViaService`, as AWS managed keys do), so a leaked node or pod
    credential cannot decrypt with it. There is no `arn:...:root` + `kms:*` statement: IAM policies alone
    grant nothing on this key."""
    account = scope.arn("iam", "root", region="")
    via_eks = {"kms:ViaService": f"eks.{scope.region}.{dns_suffix}", "kms:CallerAccount": scope.account}
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "KeyAdministrators", "Effect": "Allow", "Principal": {"AWS": sorted(set(administrators))},
         "Action": KEY_ADMIN_ACTIONS, "Resource": "*"},
        {"Sid": "KeyUseThroughEks", "Effect": "Allow", "Principal": {"AWS": account},
         "Action": ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"],
         "Resource": "*", "Condition": {"StringEquals": via_eks}},
        {"Sid": "GrantsForEks", "Effect": "Allow", "Principal": {"AWS": account}, "Action": KEY_GRANT_ACTIONS,
         "Resource": "*", "Condition": {"StringEquals": via_eks, "Bool": {"kms:GrantIsForAWSResource": "true"}}},
    ]}
