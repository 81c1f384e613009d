"""Node credentials are contained: no role an EC2 node can assume carries the CNI's or SSM's powers, the VPC CNI
alone holds its policy (IRSA for kube-system/aws-node), login pods get their own tainted nodes, and the cluster
admits only the admins it declares."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace
from typing import Any

import pulumi
import pytest

from components.aws.eks import _not_listed_twice, no_creator_admin
from components.aws.iam import CNI_POLICY, NODE_POLICIES, Scope, secrets_key_policy
from components.config.addon_versions import ADDON_VERSIONS, addon_version
from components.names import LOGIN_NODE_SELECTOR, LOGIN_TAINT
from scripts.checks.iam import ATTACHMENT, check, node_credentials, node_role_names
from scripts.checks.iam_policy import Request, evaluate
from scripts.checks.order import check as order_check
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import one, shipped_plan

ADDON = "aws:eks/addon:Addon"
NODE_GROUP = "eks:index:ManagedNodeGroup"


def attachments(plan: Plan) -> list[tuple[str, str]]:
    return [(str(a.inputs["role"]), str(a.inputs["policyArn"]).rpartition("/")[2]) for a in plan.of_type(ATTACHMENT)]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_node_roles_carry_only_the_two_node_policies(stack: str) -> None:
    plan = shipped_plan(stack)
    nodes = node_role_names(plan)
    assert nodes == {"eks-system-node", "eks-login-node", "karpenter-node"}
    for role in nodes:
        assert sorted(p for r, p in attachments(plan) if r == role) == sorted(NODE_POLICIES)
    assert list(node_credentials(plan)) == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_only_the_aws_node_service_account_holds_the_cni_policy(stack: str) -> None:
    plan = shipped_plan(stack)
    assert [r for r, p in attachments(plan) if p == CNI_POLICY] == []  # nobody: the scoped policy replaces it
    (policy,) = [r for r in plan.of_type("aws:iam/rolePolicy:RolePolicy") if r.name.endswith("vpc-cni-ec2")]
    holder = policy.inputs["role"]
    role = one(plan, "aws:iam/role:Role", holder)
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    subjects = [v for k, v in statement["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    assert subjects == ["system:serviceaccount:kube-system:aws-node"]
    cni = next(a for a in plan.of_type(ADDON) if a.inputs["addonName"] == "vpc-cni")
    assert cni.inputs["serviceAccountRoleArn"].endswith(f":role/{holder}")
    assert json.loads(cni.inputs["configurationValues"]) == {"enableNetworkPolicy": "true"}
    assert one(plan, "eks:index:Cluster").inputs["useDefaultVpcCni"] is True  # no second, node-credentialed CNI


def test_a_cni_policy_on_a_node_role_is_a_finding() -> None:
    # The defect this replaces: upstream's KarpenterNodeRole attaches the CNI and SSM policies to nodes.
    plan = copy.deepcopy(shipped_plan("prod"))
    template = next(a for a in plan.of_type(ATTACHMENT) if a.inputs["role"] == "karpenter-node")
    for policy in ("AmazonEKS_CNI_Policy", "AmazonSSMManagedInstanceCore"):
        extra = copy.deepcopy(template)
        extra.urn, extra.inputs["policyArn"] = f"{template.urn}-{policy}", f"arn:aws:iam::aws:policy/{policy}"
        plan.resources.append(extra)
    findings = [f for f in check(plan) if "node role" in f.message]
    assert len(findings) == 2
    assert "ec2:ModifyNetworkInterfaceAttribute" in findings[0].message and "ssm:*" in findings[1].message
    assert "AmazonEC2ContainerRegistryPullOnly" in findings[0].fix


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_add_on_is_pinned_to_the_table(stack: str) -> None:
    plan = shipped_plan(stack)
    version = one(plan, "eks:index:Cluster").inputs["version"]
    ours = {a.inputs["addonName"]: a.inputs.get("addonVersion") for a in plan.of_type(ADDON)
            if a.inputs["addonName"] in ADDON_VERSIONS[version]}
    assert ours == {"vpc-cni": ADDON_VERSIONS[version]["vpc-cni"], "coredns": ADDON_VERSIONS[version]["coredns"]}
    proxy = one(plan, "eks:index:Cluster").inputs["kubeProxyAddonOptions"]
    assert proxy["version"] == ADDON_VERSIONS[version]["kube-proxy"]
    with pytest.raises(KeyError, match=r"no pinned vpc-cni add-on version for Kubernetes 1\.99"):
        addon_version("1.99", "vpc-cni")


def test_node_groups_wait_for_the_cni_and_the_order_check_knows_it() -> None:
    plan = copy.deepcopy(shipped_plan("prod"))
    cni = next(a for a in plan.of_type(ADDON) if a.inputs["addonName"] == "vpc-cni")
    groups = plan.of_type(NODE_GROUP)
    assert len(groups) == 2 and all(cni.urn in g.dependencies for g in groups)
    assert order_check(plan) == []
    for g in groups:
        g.dependencies = [d for d in g.dependencies if d != cni.urn]
    findings = [f for f in order_check(plan) if "VPC CNI" in f.message]
    assert len(findings) == 2


def test_login_pods_have_their_own_tainted_node_group() -> None:
    plan = shipped_plan("prod")
    login = one(plan, NODE_GROUP, "eks-login").inputs
    assert login["labels"] == LOGIN_NODE_SELECTOR
    assert login["taints"] == [{"key": LOGIN_TAINT["key"], "value": LOGIN_TAINT["value"], "effect": "NO_SCHEDULE"}]
    assert login["nodeRole"] != one(plan, NODE_GROUP, "eks-system").inputs["nodeRole"]
    template = one(plan, "aws:ec2/launchTemplate:LaunchTemplate", "eks-login").inputs["metadataOptions"]
    assert template["httpTokens"] == "required" and template["httpPutResponseHopLimit"] == 1
    assert {g.inputs["releaseVersion"] for g in plan.of_type(NODE_GROUP)} == {"1.33.13-20260714"}


def _cluster_args(props: dict[str, Any], type_: str = "aws:eks/cluster:Cluster") -> Any:
    return SimpleNamespace(type_=type_, props=props, opts=pulumi.ResourceOptions())


def test_the_cluster_creator_gets_no_implicit_admin() -> None:
    # pulumi-eks v4 sets it true; the transform turns it off on the aws.eks.Cluster it creates, nothing else.
    props = {"name": "c",
             "accessConfig": {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True}}
    result = no_creator_admin(_cluster_args(props))
    assert result is not None and result.props["accessConfig"] == {
        "authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert no_creator_admin(_cluster_args(props, "aws:eks/addon:Addon")) is None
    entries = one(shipped_plan("prod"), "eks:index:Cluster").inputs["accessEntries"]
    assert entries["deployer"]["principalArn"] == "arn:aws:iam::123456789012:user/planner"  # the mocks' caller


def test_the_deployer_listed_among_the_admins_is_a_clear_error() -> None:
    arn = "arn:aws:iam::123456789012:role/ci"
    assert _not_listed_twice(arn, ["arn:aws:iam::123456789012:role/admins"]) == arn
    with pytest.raises(pulumi.RunError, match=r"adminRoleArns\[1\]: .*role/ci is the role `pulumi up` runs as"):
        _not_listed_twice(arn, ["arn:aws:iam::123456789012:role/admins", arn])


def test_key_administrators_cannot_decrypt_and_eks_alone_can_use_the_key() -> None:
    scope = Scope("aws", "us-west-2", "123456789012")
    admin = "arn:aws:iam::123456789012:role/admins"
    policy = [("key", secrets_key_policy(scope, "amazonaws.com", [admin]))]

    def allowed(action: str, **context: str) -> bool:
        # Key policy principals are matched by hand: KeyAdministrators names `admin`; the others the account.
        statements = [s for s in policy[0][1]["Statement"]
                      if (admin in s["Principal"]["AWS"]) == (context.pop("as_admin", "") == "yes")]
        return evaluate([("key", {"Statement": statements})], Request(action, "*", context)).allowed

    assert allowed("kms:PutKeyPolicy", as_admin="yes") and allowed("kms:ScheduleKeyDeletion", as_admin="yes")
    assert not allowed("kms:Decrypt", as_admin="yes")
    via_eks = {"kms:ViaService": "eks.us-west-2.amazonaws.com", "kms:CallerAccount": "123456789012"}
    assert allowed("kms:Decrypt", **via_eks)
    assert not allowed("kms:Decrypt", **{**via_eks, "kms:ViaService": "ec2.us-west-2.amazonaws.com"})
    assert not allowed("kms:PutKeyPolicy", **via_eks)


def test_the_key_policy_in_the_plan_names_the_admins_and_the_deployer() -> None:
    key = one(shipped_plan("prod"), "aws:kms/key:Key").inputs
    (admins,) = [s for s in json.loads(key["policy"])["Statement"] if s["Sid"] == "KeyAdministrators"]
    assert admins["Principal"]["AWS"] == ["arn:aws:iam::123456789012:role/platform-admins",
                                          "arn:aws:iam::123456789012:user/planner"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_cluster_and_its_secrets_key_are_protected(stack: str) -> None:
    # `pulumi destroy` stops at them; the policy pack's Resource model carries no `protect`, the plan does.
    plan = shipped_plan(stack)
    assert one(plan, "aws:kms/key:Key").protect is True and one(plan, "eks:index:Cluster").protect is True
