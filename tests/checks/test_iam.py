"""The deploy check's *iam* rule on the shipped stacks, and on plans broken the ways it exists to catch."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from components.findings import Finding
from scripts.checks.iam import check, controller_roles, plan_facts
from scripts.checks.iam_requests import CONTROLLERS
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import one, shipped_plan

Document = dict[str, Any]


def with_policy(name: str, change: Callable[[Document], Document | None]) -> Plan:
    """The prod plan with the inline policy `name` changed (or removed, when `change` returns None)."""
    plan = copy.deepcopy(shipped_plan("prod"))
    resource = one(plan, "aws:iam/rolePolicy:RolePolicy", name)
    document = change(json.loads(resource.inputs["policy"]))
    if document is None:
        plan.resources.remove(resource)
    else:
        resource.inputs["policy"] = json.dumps(document)
    return plan


def statement(document: Document, sid: str) -> Document:
    (found,) = [s for s in document["Statement"] if s.get("Sid") == sid]
    return found


def denied_action(finding: Finding) -> str:
    match = re.search(r" is denied (\S+) on ", finding.message)
    assert match, finding.message
    return match.group(1)


def denied(findings: list[Finding], action: str) -> list[Finding]:
    return [f for f in findings if denied_action(f) == action]


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_the_shipped_stacks_pass(stack: str) -> None:
    plan = shipped_plan(stack)
    roles = {r.service_account: r for r in controller_roles(plan)}
    # Not vacuous: every controller's role is found, and Karpenter's requests cover each node class.
    # On RDS, the database-user Job's reads the one master secret (tests/plan/test_secrets.py); Grafana's reads
    # CloudWatch metrics only (tests/observability/test_cloudwatch.py).
    # MLflow's (addons.mlflow, prod) reads that secret too (tests/mlflow/test_plan.py).
    others = {"system:serviceaccount:monitoring:prometheus-grafana"} | (
        {"system:serviceaccount:slurm:slurm-db-user", "system:serviceaccount:mlflow:mlflow-db-user"}
        if stack == "prod" else set())
    # The EFS CSI controller exists only where storage.efs is on (prod); the lifecycle controller reads EC2 only
    # with EFA partitions or Capacity Blocks (prod); the MLflow server only with addons.mlflow (prod).
    prod_only = ("the EFS CSI controller", "the node lifecycle controller", "the MLflow tracking server",
                 "the jobs' checkpoint store")
    controllers = {c.service_account for c in CONTROLLERS if stack == "prod" or c.name not in prod_only}
    assert set(roles) == controllers | others
    facts = plan_facts(plan, roles["system:serviceaccount:kube-system:karpenter"].provider_arn)
    assert facts.partition == "aws" and facts.account == "123456789012" and facts.region == "us-west-2"
    assert facts.node_classes and facts.interruption_queue and facts.cluster
    assert all(len(c.calls(facts)) > 0 for c in CONTROLLERS if c.service_account in controllers)
    assert check(plan) == []


def test_the_old_nodeclass_tag_denies_instance_profile_creation() -> None:
    # The policy this project shipped before: instance profiles conditioned on `karpenter.sh/nodeclass`, a tag
    # Karpenter 1.14 never sets (it tags them `karpenter.k8s.aws/ec2nodeclass`).
    def old_tag(document: Document) -> Document:
        return json.loads(json.dumps(document).replace("karpenter.k8s.aws/ec2nodeclass", "karpenter.sh/nodeclass"))

    findings = check(with_policy("karpenter-controller", old_tag))
    (create, *_) = denied(findings, "iam:CreateInstanceProfile")
    assert create.rule == "iam" and create.resource == "karpenter-controller (aws:iam/role:Role)"
    assert ":instance-profile/karpenter/us-west-2/ml-training-prod/" in create.message
    assert ("AllowScopedInstanceProfileCreationActions needs StringLike aws:RequestTag/karpenter.sh/nodeclass ['*']: "
            "the request does not carry aws:RequestTag/karpenter.sh/nodeclass") in create.message
    assert "cloudformation.yaml" in create.fix and "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass" in create.fix
    assert denied(findings, "iam:AddRoleToInstanceProfile") and denied(findings, "iam:DeleteInstanceProfile")


def test_list_instance_profiles_scoped_to_instance_profiles_is_denied() -> None:
    def scoped(document: Document) -> Document:
        statement(document, "AllowUnscopedInstanceProfileListAction")["Resource"] = (
            statement(document, "AllowInstanceProfileReadActions")["Resource"])
        return document

    (finding,) = check(with_policy("karpenter-controller", scoped))
    assert finding.message.startswith(
        "Karpenter (system:serviceaccount:kube-system:karpenter) is denied iam:ListInstanceProfiles on *: "
        "no statement allows it on this resource")


def test_a_launch_without_the_cluster_name_tag_is_denied() -> None:
    # Upstream requires eks:eks-cluster-name on every launch; a policy wanting another value denies them all.
    def other_cluster(document: Document) -> Document:
        for sid in ("AllowScopedEC2InstanceActionsWithTags", "AllowScopedResourceCreationTagging"):
            statement(document, sid)["Condition"]["StringEquals"]["aws:RequestTag/eks:eks-cluster-name"] = "other"
        return document

    findings = check(with_policy("karpenter-controller", other_cluster))
    assert {denied_action(f) for f in findings} == {
        "ec2:CreateLaunchTemplate", "ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateTags"}
    assert all("aws:RequestTag/eks:eks-cluster-name ['other']: the request has 'ml-training-prod'" in f.message
               for f in findings)


def test_a_policy_written_for_another_partition_is_denied() -> None:
    # The same cluster in aws-cn: its OIDC provider (hence every request) is arn:aws-cn:, the policies are not.
    plan = copy.deepcopy(shipped_plan("prod"))
    for role in plan.of_type("aws:iam/role:Role"):
        role.inputs["assumeRolePolicy"] = role.inputs["assumeRolePolicy"].replace("arn:aws:iam::", "arn:aws-cn:iam::")
    findings = check(plan)
    assert denied(findings, "eks:DescribeCluster") and denied(findings, "sqs:ReceiveMessage")
    assert denied(findings, "ec2:CreateVolume")  # the EBS CSI controller's
    assert not denied(findings, "fsx:DescribeFileSystems")  # on `*` in its region: no ARN to get wrong


def test_the_fsx_csi_controller_is_held_to_its_region() -> None:
    def elsewhere(document: Document) -> Document:
        document["Statement"][0]["Condition"]["StringEquals"]["aws:RequestedRegion"] = "us-east-1"
        return document

    (finding,) = check(with_policy("storage-csi-controller", elsewhere))
    assert finding.resource == "storage-csi-controller (aws:iam/role:Role)"
    assert "the FSx CSI controller (system:serviceaccount:kube-system:fsx-csi-controller-sa) is denied " \
           "fsx:DescribeFileSystems on *" in finding.message
    assert "aws:RequestedRegion ['us-east-1']: the request has 'us-west-2'" in finding.message


def test_efs_access_points_must_carry_the_tag_the_driver_sets() -> None:
    def wrong_tag(document: Document) -> Document:
        statement(document, "CreateTaggedAccessPoints")["Condition"]["StringLike"] = {
            "aws:RequestTag/efs.csi.aws.com/cluster": "ml-training-prod"}
        return document

    (finding,) = check(with_policy("models-efs-csi-controller", wrong_tag))
    assert finding.resource == "models-efs-csi-controller (aws:iam/role:Role)"
    assert "the EFS CSI controller (system:serviceaccount:kube-system:efs-csi-controller-sa) is denied " \
           "elasticfilesystem:CreateAccessPoint on arn:aws:elasticfilesystem:us-west-2:123456789012:file-system/" \
           in finding.message
    assert "the request has 'true'" in finding.message


def test_the_efs_csi_controller_needs_each_statement_of_its_policy() -> None:
    def no_tagging(document: Document) -> Document:
        statement(document, "TagTaggedAccessPoints")["Action"] = "elasticfilesystem:UntagResource"
        return document

    (finding,) = check(with_policy("models-efs-csi-controller", no_tagging))
    assert denied_action(finding) == "elasticfilesystem:TagResource"
    findings = check(with_policy("models-efs-csi-controller", lambda document: None))
    assert {denied_action(f) for f in findings} == {
        f"elasticfilesystem:{a}" for a in ("DescribeFileSystems", "DescribeMountTargets", "DescribeAccessPoints",
                                           "CreateAccessPoint", "TagResource", "DeleteAccessPoint")}


def test_the_ebs_csi_controller_needs_its_inline_policy() -> None:
    # What the role had before: only the AWS-managed policy, attached by ARN, which no plan shows.
    findings = check(with_policy("slurm-state-ebs-csi", lambda document: None))
    assert {f.resource for f in findings} == {"slurm-state-ebs-csi (aws:iam/role:Role)"}
    assert denied(findings, "ec2:CreateVolume") and denied(findings, "ec2:AttachVolume")
    assert all(f.message.endswith("no statement allows the action") for f in findings)


def test_ebs_volumes_must_carry_the_managed_tag_the_driver_sets() -> None:
    def wrong_tag(document: Document) -> Document:
        statement(document, "CreateAndCopyVolumesWithManagedTag")["Condition"] = {
            "StringEquals": {"aws:RequestTag/ebs.csi.aws.com/cluster": "ml-training-prod"}}
        return document

    (finding,) = check(with_policy("slurm-state-ebs-csi", wrong_tag))
    assert "is denied ec2:CreateVolume on arn:aws:ec2:us-west-2:123456789012:volume/" in finding.message
    assert "the request has 'true'" in finding.message


def test_the_lifecycle_controller_needs_its_ec2_reads() -> None:
    # Prod places its EFA partitions in Slurm's topology: without DescribeInstanceTopology the step cannot run.
    def no_topology(document: Document) -> Document:
        kept = [{**s, "Action": [a for a in s["Action"] if a != "ec2:DescribeInstanceTopology"] or ["ec2:DescribeTags"]}
                for s in document["Statement"]]
        return {**document, "Statement": kept}

    findings = check(with_policy("repair-ec2", no_topology))
    assert [denied_action(f) for f in findings] == ["ec2:DescribeInstanceTopology"]
    assert "the node lifecycle controller" in findings[0].message


def _cni_policy_name(plan: Plan) -> str:
    (name,) = [r.name for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("vpc-cni-ec2")]
    return name


def test_the_vpc_cni_reaches_this_vpcs_interfaces_and_this_clusters_instances_only() -> None:
    """Before: the AWS-managed AmazonEKS_CNI_Policy, every ENI and instance of the account (which no plan shows).
    Now the CNI's own calls (pkg/awsutils/awsutils.go) pass the scoped policy, and scoping it to another VPC or
    cluster denies them."""
    name = _cni_policy_name(shipped_plan("prod"))

    def other_vpc(document: Document) -> Document:
        text = json.dumps(document)
        vpc = re.search(r"vpc/(vpc-[0-9a-f]+)", text).group(1)  # type: ignore[union-attr]
        return json.loads(text.replace(vpc, "vpc-0000000000other"))

    findings = check(with_policy(name, other_vpc))
    assert {denied_action(f) for f in findings} >= {"ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
                                                    "ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface"}
    assert all("the VPC CNI" in f.message for f in findings)

    def other_cluster(document: Document) -> Document:
        statement(document, "ThisClustersInstances")["Condition"] = {
            "StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/another": "owned"}}
        return document

    findings = check(with_policy(name, other_cluster))
    assert {denied_action(f) for f in findings} == {"ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface",
                                                    "ec2:ModifyNetworkInterfaceAttribute"}
    assert all(":instance/" in f.message for f in findings)
