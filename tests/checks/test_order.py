"""The deploy check's order rule: the shipped stacks pass, and each race of the first `pulumi up` is named."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from components.config.stackfile import load_stack
from scripts.checks import order
from scripts.offline.plan_model import Plan, PlannedResource
from tests.plan.fixtures import shipped_plan

PROVIDER = "pulumi:providers:kubernetes"


def broken(stack: str, change: Callable[[Plan], None]) -> Plan:
    plan = copy.deepcopy(shipped_plan(stack))
    change(plan)
    return plan


def only(plan: Plan, type_: str, name: str | None = None) -> PlannedResource:
    (found,) = [r for r in plan.of_type(type_) if name is None or r.name == name]
    return found


def without(resource: PlannedResource, type_: str) -> None:
    resource.dependencies = [d for d in resource.dependencies if f"${type_}::" not in d]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_pass(stack: str) -> None:
    plan = shipped_plan(stack)
    assert order.check(plan) == []
    # Not vacuous: the table holds the needs the fixes answer.
    pairs = {(n.resource.type, n.needs.type) for n in order.needs(plan)}
    assert {("aws:eks/accessEntry:AccessEntry", order.CLUSTER), (order.ADDON, order.NODE_GROUP),
            (order.RELEASE, order.NODE_GROUP), ("kubernetes:karpenter.sh/v1:NodePool", order.RELEASE),
            ("kubernetes:slinky.slurm.net/v1beta1:NodeSet", order.RELEASE)} <= pairs


def test_an_access_entry_that_names_the_cluster_as_a_string_races_it() -> None:
    plan = broken("prod", lambda p: without(only(p, "aws:eks/accessEntry:AccessEntry", "karpenter-node"),
                                            order.CLUSTER))
    (finding,) = order.check(plan)
    assert finding.resource == "karpenter-node (aws:eks/accessEntry:AccessEntry)"
    assert finding.message.startswith("does not wait for eks (eks:index:Cluster)")


def test_helm_releases_that_wait_need_the_system_nodes() -> None:
    def provider_without_nodes(plan: Plan) -> None:
        provider = only(plan, PROVIDER)
        without(provider, order.NODE_GROUP)
        without(provider, order.ADDON)  # CoreDNS itself waits for the nodes

    found = order.check(broken("prod", provider_without_nodes))
    assert "karpenter (kubernetes:helm.sh/v3:Release)" in {f.resource for f in found}
    assert all("eks-system (eks:index:ManagedNodeGroup)" in f.message for f in found)


def test_coredns_needs_a_node_group() -> None:
    plan = broken("prod", lambda p: without(only(p, order.ADDON, "eks-coredns"), order.NODE_GROUP))
    assert [f.resource for f in order.check(plan)] == ["eks-coredns (aws:eks/addon:Addon)"]


def test_coredns_inside_the_cluster_component_is_a_race() -> None:
    def pulumi_eks_coredns(plan: Plan) -> None:
        only(plan, order.CLUSTER).inputs["corednsAddonOptions"] = {"enabled": True}

    (finding,) = order.check(broken("prod", pulumi_eks_coredns))
    assert finding.resource == "eks (eks:index:Cluster)" and "CoreDNS" in finding.message


def test_custom_resources_wait_for_the_chart_that_serves_their_kind() -> None:
    def partitions_without_crds(plan: Plan) -> None:
        for r in plan.resources:
            if r.is_manifest and r.inputs["kind"] in ("NodePool", "EC2NodeClass"):
                r.dependencies = [d for d in r.dependencies if "karpenter-crd" not in d]

    found = {f.resource for f in order.check(broken("prod", partitions_without_crds)) if "karpenter-crd" in f.message}
    prod, _ = load_stack("prod")
    groups = [*(f"partition-{n}" for n in prod.partitions), *(f"pool-{n}" for n in prod.kubernetes_pools)]
    assert found == {f"{p}-{kind} (kubernetes:{group})" for p in groups
                     for kind, group in (("nodepool", "karpenter.sh/v1:NodePool"),
                                         ("nodeclass", "karpenter.k8s.aws/v1:EC2NodeClass"))}


def test_daemonset_add_ons_need_no_node() -> None:
    plan = broken("prod", lambda p: only(p, order.ADDON, "slurm-state-ebs-csi").inputs.update(addonName="kube-proxy"))
    assert "slurm-state-ebs-csi" not in {n.resource.name for n in order.needs(plan) if n.needs.type == order.NODE_GROUP}


def test_waiting_for_a_component_waits_for_its_children() -> None:
    plan = shipped_plan("prod")
    waits = order.Waits(plan)
    coredns = only(plan, order.ADDON, "eks-coredns")
    # The EBS CSI add-on depends on the EksCluster component, so it waits for CoreDNS inside it.
    ebs = only(plan, order.ADDON, "slurm-state-ebs-csi")
    assert coredns.urn in waits.closure(ebs.urn)


def _synthetic(urn: str, type_: str, *, deps: list[str] | None = None, parent: str | None = None,
               custom: bool = True, inputs: dict | None = None) -> PlannedResource:
    return PlannedResource(urn=urn, type=type_, name=urn, parent=parent, provider=None, dependencies=deps or [],
                           custom=custom, protect=False, retain_on_delete=False, inputs=inputs or {})


def test_a_dependency_on_a_component_covers_its_descendants_only() -> None:
    plan = Plan("t", "p", [
        _synthetic("comp", "my:index:Component", custom=False),
        _synthetic("child", "aws:x/y:Y", parent="comp"),
        _synthetic("grandchild", "aws:x/y:Y", parent="child"),
        _synthetic("other", "aws:x/y:Y"),
        _synthetic("waiter", "aws:x/y:Y", deps=["comp"]),
    ])
    assert order.Waits(plan).closure("waiter") == {"comp", "child", "grandchild"}


def test_only_pods_need_a_node() -> None:
    plan = shipped_plan("prod")
    needing_nodes = {n.resource.urn for n in order.needs(plan) if n.needs.type == order.NODE_GROUP}
    assert {"eks-coredns", "slurm-state-ebs-csi"} <= {plan.by_urn()[u].name for u in needing_nodes}  # Deployments
    kinds = {r.inputs["kind"] for r in plan.resources if r.is_manifest and r.urn in needing_nodes}
    assert kinds <= order.POD_KINDS and "NodeSet" in kinds and "ConfigMap" not in kinds


def test_components_need_nothing_of_their_own() -> None:
    """A component (pulumi-kubernetes' yaml/v2 ConfigGroup is one) creates nothing itself: only its custom
    children are checked."""
    plan = Plan("t", "p", [
        _synthetic("eks", order.CLUSTER, inputs={"name": "c"}),
        _synthetic("group", "kubernetes:yaml/v2:ConfigGroup", custom=False, inputs={"clusterName": "c"}),
    ])
    assert [n.resource.name for n in order.needs(plan)] == []
    plan.resources[1].custom = True
    assert [n.resource.name for n in order.needs(plan)] == ["group", "group"]


def test_pods_wait_for_their_namespace_and_its_network_policies() -> None:
    def keda_before_its_policies(plan: Plan) -> None:
        keda = only(plan, order.RELEASE, "keda")
        keda.dependencies = [d for d in keda.dependencies if "NetworkPolicy" not in d]

    found = order.check(broken("prod", keda_before_its_policies))
    assert found and {f.resource for f in found} == {"keda (kubernetes:helm.sh/v3:Release)"}
    assert all("(kubernetes:networking.k8s.io/v1:NetworkPolicy)" in f.message for f in found)
    # Not vacuous: each shipped Release and pod-running object in the slurm namespace has these needs.
    pairs = {(n.resource.type, n.needs.type) for n in order.needs(shipped_plan("prod"))}
    assert {(order.RELEASE, "kubernetes:core/v1:Namespace"),
            ("kubernetes:slinky.slurm.net/v1beta1:NodeSet", "kubernetes:networking.k8s.io/v1:NetworkPolicy")} <= pairs
