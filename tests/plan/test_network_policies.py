"""The shipped plans' NetworkPolicies against the pod-network rule: every needed flow open, every forbidden one
shut; one allow removed or an allow-all added, and the rule fires."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from components.config.cluster import ClusterConfig
from components.config.stackfile import load_stack
from components.findings_render import render_text
from components.slinky.slurm_conf import SRUN_PORT_RANGE
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
    assert render_text(pod_flows.check(plan, config)) == ""
    assert namespace_default_deny(plan.resources) == []


def test_removing_one_allow_blocks_a_needed_flow() -> None:
    plan, config = plan_and_config("prod")
    plan.resources = [r for r in plan.resources if not (
        r.type == pod_flows.NETWORK_POLICY and r.inputs["metadata"] == {"name": "slurmrestd", "namespace": "slurm"})]
    found = [f.resource for f in pod_flows.check(plan, config)]
    assert "the Slinky operator -> slurmrestd (tcp 6820)" in found


def _slurm_policy(plan: Plan, name: str) -> dict:
    (found,) = [r.inputs for r in policies(plan) if r.inputs["metadata"] == {"name": name, "namespace": "slurm"}]
    return found


def test_srun_in_a_batch_script_is_called_back_on_the_range_slurm_conf_sets() -> None:
    """slurmctld reaches srun where it runs: in a slurmd pod (a batch script's srun) and on a login pod, on the
    plan's SrunPortRange; a slurmd policy without the range blocks the callback, named with its ports."""
    plan, config = plan_and_config("prod")
    assert pod_flows.srun_ports(plan) == SRUN_PORT_RANGE
    slurmd = _slurm_policy(plan, "slurmd")
    (from_slurmctld,) = [rule for rule in slurmd["spec"]["ingress"]
                         if rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "slurmctld"}}}]]
    from_slurmctld["ports"] = [p for p in from_slurmctld["ports"] if p.get("port") == 6818]  # the range dropped
    found = [f for f in pod_flows.check(plan, config) if f.resource.startswith("slurmctld -> slurmd of")]
    low, high = SRUN_PORT_RANGE
    assert {f.resource for f in found} == {f"slurmctld -> slurmd of {p} (tcp {low}-{high})" for p in config.partitions}
    assert all("srun in a batch script" in f.message and "slurmd of" in f.message and "ingress" in f.message
               for f in found)


def test_without_srun_port_range_srun_may_listen_anywhere_and_the_policies_fall_short() -> None:
    """The slurm.conf line and the policies come from one constant: a plan whose slurm.conf lacks SrunPortRange
    has srun on any port, which the range-only policies do not admit."""
    plan, config = plan_and_config("dev")
    (controller,) = [r for r in plan.resources if r.is_manifest and r.inputs.get("kind") == "Controller"]
    spec = controller.inputs["spec"]
    spec["extraConf"] = "".join(line + "\n" for line in spec["extraConf"].splitlines()
                                if not line.startswith("SrunPortRange="))
    assert pod_flows.srun_ports(plan) == pod_flows.EPHEMERAL
    found = {f.resource for f in pod_flows.check(plan, config)}
    assert {"slurmctld -> slurmd of gpu (tcp 1024-65535)", "slurmctld -> a login pod (tcp 1024-65535)",
            "slurmd of gpu -> a login pod (tcp 1024-65535)"} <= found


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
    from components.segmentation.network_policies import default_deny

    namespace = resource("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "slurm"}})
    deny = resource(pod_flows.NETWORK_POLICY, "deny", default_deny("slurm"))
    assert namespace_default_deny(hand_made(namespace, deny).resources) == []
    assert namespace_default_deny(hand_made(namespace).resources) != []
