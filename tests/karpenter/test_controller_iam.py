"""Karpenter's controller IAM is upstream's, statement by statement, in the deploying partition; so are the
node roles' managed policies and trust."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from components.aws.iam import Scope
from components.compute.karpenter import controller_policy
from scripts.offline.mocks import ACCOUNT, RealisticMocks
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan
from tests.conftest import require_shared
from tests.plan.fixtures import one, shipped_plan

UPSTREAM_POLICIES = ("NodeLifecyclePolicy", "IAMIntegrationPolicy", "EKSIntegrationPolicy", "InterruptionPolicy",
                     "ResourceDiscoveryPolicy")


class _CloudFormation(yaml.SafeLoader):
    """Reads `!Sub`, `!GetAtt` and `!Ref` as their plain text."""


_CloudFormation.add_multi_constructor("!", lambda loader, _, node: loader.construct_scalar(node))


def upstream_statements(substitutions: dict[str, str]) -> list[dict[str, Any]]:
    template = yaml.load(require_shared("upstream/karpenter/cloudformation-v1.14.yaml").read_text(),
                         Loader=_CloudFormation)
    statements = []
    for name in UPSTREAM_POLICIES:
        text = template["Resources"][name]["Properties"]["PolicyDocument"]
        for variable, value in substitutions.items():
            text = text.replace("${" + variable + "}", value)
        statements += json.loads(text)["Statement"]
    return statements


def test_the_policy_is_upstreams_five_policies_statement_by_statement() -> None:
    # A partition other than `aws`, so a hard-coded `arn:aws:` shows.
    scope = Scope("aws-cn", "cn-northwest-1", "210987654321")
    queue, node_role = "arn:aws-cn:sqs:cn-northwest-1:210987654321:c1-karpenter", "arn:aws-cn:iam::210987654321:role/n"
    expected = upstream_statements({"AWS::Partition": scope.partition, "AWS::Region": scope.region,
                                    "AWS::AccountId": scope.account, "ClusterName": "c1",
                                    "KarpenterInterruptionQueue.Arn": queue, "KarpenterNodeRole.Arn": node_role})
    policy = controller_policy(scope, "c1", queue, node_role)
    assert [s["Sid"] for s in policy["Statement"]] == [s["Sid"] for s in expected]
    for mine, theirs in zip(policy["Statement"], expected, strict=True):
        assert mine == theirs, mine["Sid"]
    assert "arn:aws:" not in json.dumps(policy)


def test_the_plan_writes_it_for_this_cluster() -> None:
    plan = shipped_plan("prod")
    written = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "karpenter-controller").inputs["policy"])
    expected = controller_policy(Scope("aws", "us-west-2", ACCOUNT), "ml-training-prod",
                                 f"arn:aws:sqs:us-west-2:{ACCOUNT}:ml-training-prod-karpenter",
                                 f"arn:aws:iam::{ACCOUNT}:role/karpenter-node")
    assert written == expected


@pytest.fixture(scope="module")
def china_plan() -> Iterator[Plan]:
    """The prod stack planned as if the provider were in the aws-cn partition."""
    real = RealisticMocks.call

    def call(self: RealisticMocks, args: Any) -> Any:
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws-cn", "dnsSuffix": "amazonaws.com.cn", "id": "aws-cn"}, []
        return real(self, args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RealisticMocks, "call", call)
        yield run_plan("prod")[0]


def test_node_roles_take_the_partition_from_the_provider(china_plan: Plan) -> None:
    nodes = [r for r in china_plan.of_type("aws:iam/role:Role") if r.name.endswith("node")]
    assert {r.name for r in nodes} == {"eks-system-node", "eks-login-node", "karpenter-node"}
    for role in nodes:
        (trust,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert trust["Principal"] == {"Service": "ec2.amazonaws.com.cn"}
    arns = [a.inputs["policyArn"] for a in china_plan.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")]
    # Two per node role; the VPC CNI's is its own inline policy (components/aws/eks_addons.py cni_policy).
    assert len(arns) == 6 and all(a.startswith("arn:aws-cn:iam::aws:policy/") for a in arns)
    (cni,) = [r for r in china_plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("vpc-cni-ec2")]
    resources = [r for s in json.loads(cni.inputs["policy"])["Statement"]
                 for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]) if r != "*"]
    assert resources and all(r.startswith("arn:aws-cn:ec2:") for r in resources)


def test_controller_policies_take_the_partition_from_the_provider(china_plan: Plan) -> None:
    for name in ("karpenter-controller", "slurm-state-ebs-csi"):
        policy = json.loads(one(china_plan, "aws:iam/rolePolicy:RolePolicy", name).inputs["policy"])
        resources = [r for s in policy["Statement"] for r in (s["Resource"] if isinstance(s["Resource"], list)
                                                              else [s["Resource"]]) if r != "*"]
        # The queue and node role ARNs are the mocks' (always arn:aws:), not the policy's own.
        own = [r for r in resources if ":sqs:" not in r and ":role/" not in r]
        assert own and all(r.startswith("arn:aws-cn:") for r in own), name


def test_it_fits_in_one_inline_policy_for_the_longest_cluster_name() -> None:
    # A role's inline policies hold 10,240 characters, whitespace not counted
    # (docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html); EKS names have up to 100.
    name = "c" * 100
    policy = controller_policy(Scope("aws-us-gov", "us-gov-west-1", ACCOUNT), name,
                               f"arn:aws-us-gov:sqs:us-gov-west-1:{ACCOUNT}:{name}-karpenter",
                               f"arn:aws-us-gov:iam::{ACCOUNT}:role/{name}-karpenter-node")
    assert len(re.sub(r"\s", "", json.dumps(policy))) <= 10_240


def test_admin_access_policy_takes_the_partition_from_the_provider(china_plan: Plan) -> None:
    entries = one(china_plan, "eks:index:Cluster").inputs["accessEntries"]
    # The admin role and the deployer.
    assert [p["policyArn"] for e in entries.values() for p in e["accessPolicies"].values()] == [
        "arn:aws-cn:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"] * 2
