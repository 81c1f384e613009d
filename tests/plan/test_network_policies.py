"""The shipped plans' NetworkPolicies against the pod-network rule: every needed flow open, every forbidden one
shut; one allow removed or an allow-all added, and the rule fires."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from components.config import ClusterConfig
from components.stackfile import load_stack
from policy.stack_rules import namespace_default_deny
from scripts.checks import pod_flows
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import shipped_plan
from tests.policy.broken import hand_made, resource

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def plan_and_config(stack: str) -> tuple[Plan, ClusterConfig]:
    return copy.deepcopy(shipped_plan(stack)), load_stack(stack, STACKS)[0]


def policies(plan: Plan) -> list:
    return plan.of_type(pod_flows.NETWORK_POLICY)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_plans_pass(stack: str) -> None:
    plan, config = plan_and_config(stack)
    assert policies(plan), "the plan has no NetworkPolicy (is NetworkPolicies wired into components/program.py?)"
    assert [f.render() for f in pod_flows.check(plan, config)] == []
    assert namespace_default_deny(plan.resources) == []


def test_removing_one_allow_blocks_a_needed_flow() -> None:
    plan, config = plan_and_config("prod")
    plan.resources = [r for r in plan.resources if not (
        r.type == pod_flows.NETWORK_POLICY and r.inputs["metadata"] == {"name": "slurmrestd", "namespace": "slurm"})]
    found = [f.resource for f in pod_flows.check(plan, config)]
    assert "the Slinky operator -> slurmrestd (tcp 6820)" in found


def test_an_allow_all_opens_forbidden_flows() -> None:
    plan, config = plan_and_config("dev")
    plan.resources.append(resource(pod_flows.NETWORK_POLICY, "allow-all", {
        "metadata": {"name": "allow-all", "namespace": "slurm"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [{}], "egress": [{}]}}))
    found = {f.resource for f in pod_flows.check(plan, config)}
    assert {"slurmd of gpu -> slurmdbd (tcp 6819)", "slurmd of gpu -> the in-cluster MariaDB (tcp 3306)",
            "a login pod -> slurmrestd (tcp 6820)"} <= found


def test_unenforced_policies_are_a_finding() -> None:
    plan, config = plan_and_config("dev")
    for addon in plan.of_type("aws:eks/addon:Addon"):
        addon.inputs.pop("configurationValues", None)
    for cluster in plan.of_type("eks:index:Cluster"):
        cluster.inputs.pop("vpcCniOptions", None)
    assert any("not enforced" in f.message for f in pod_flows.check(plan, config))


def test_the_default_deny_the_component_writes_satisfies_the_policy_pack() -> None:
    from components.network_policies import default_deny

    namespace = resource("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "slurm"}})
    deny = resource(pod_flows.NETWORK_POLICY, "deny", default_deny("slurm"))
    assert namespace_default_deny(hand_made(namespace, deny).resources) == []
    assert namespace_default_deny(hand_made(namespace).resources) != []
