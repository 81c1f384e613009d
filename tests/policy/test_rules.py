"""The rules offline: the shipped stacks pass, every rule fails on a plan that breaks it, and near misses pass."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from policy.model import UNKNOWN, Enforcement
from policy.ruleset import RULES, evaluate
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import one, shipped_plan
from tests.policy.broken import CASES, EKS, INGRESS, NODE_CLASS, NODE_POOL, Case, _mutate, _open_login, _requirement


def flagged(plan: Plan) -> set[tuple[str, str]]:
    return {(v.rule.name, v.urn) for v in evaluate(plan.resources)}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_have_no_violations(stack: str) -> None:
    violations = evaluate(shipped_plan(stack).resources)
    assert [(v.rule.name, v.urn, v.message) for v in violations] == []


def test_every_rule_has_a_breaking_plan() -> None:
    assert {c.rule for c in CASES} == {r.name for r in RULES}


def test_rule_names_are_unique_and_documented() -> None:
    assert len({r.name for r in RULES}) == len(RULES)
    assert all(r.description and r.fix for r in RULES)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_breaking_plan_is_flagged(case: Case) -> None:
    plan, urn = case.make()
    assert (case.rule, urn) in flagged(plan)


def _consolidation_held_by_budget(inputs: dict) -> None:
    disruption = inputs["spec"]["disruption"]
    disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
    disruption["budgets"].append({"nodes": "0", "reasons": ["Underutilized"]})


def _cidr_rule_on_the_nodes_group(inputs: dict) -> None:
    inputs.pop("referencedSecurityGroupId")
    inputs["cidrIpv4"] = "10.0.0.0/16"


# Settings close to a violation that the rules must accept.
NEAR_MISSES: list[tuple[str, str, Callable[[], tuple[Plan, str]]]] = [
    ("imdsv2-required", "EC2NodeClass without metadataOptions (Karpenter defaults to required)",
     _mutate(NODE_CLASS, "partition-gpu-h100-nodeclass", lambda i: i["spec"].pop("metadataOptions"))),
    ("no-world-ssh", "login NLB open to the listed office range, internet-facing",
     _mutate("kubernetes:slinky.slurm.net/v1beta1:LoginSet", None, lambda i: _open_login(i, ["203.0.113.0/24"]))),
    ("eks-api-not-world", "public endpoint limited to office ranges",
     _mutate(EKS, None, lambda i: i.update(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"]))),
    ("eks-secrets-encryption", "KMS key ARN not known until deploy",
     _mutate(EKS, None, lambda i: i.update(encryptionConfigKeyArn=UNKNOWN))),
    ("nodepool-keeps-busy-nodes", "WhenEmptyOrUnderutilized held back by a 0-node Underutilized budget",
     _mutate(NODE_POOL, "partition-gpu-a100-nodepool", _consolidation_held_by_budget)),
    ("efa-no-spot", "EFA NodePool excluding spot",
     _mutate(NODE_POOL, "partition-gpu-h100-nodepool",
             lambda i: _requirement(i, "karpenter.sh/capacity-type").update(operator="NotIn", values=["spot"]))),
    # The Lustre client rule on the nodes' group: with a CIDR it references no FSx group, so it guards nothing.
    ("storage-cluster-only", "CIDR rule on the cluster's own group",
     _mutate(INGRESS, "storage-nodes-from-fsx-988", _cidr_rule_on_the_nodes_group)),
]


@pytest.mark.parametrize(("rule", "what", "make"), NEAR_MISSES, ids=[f"{r}: {w}" for r, w, _ in NEAR_MISSES])
def test_near_miss_is_accepted(rule: str, what: str, make: Callable[[], tuple[Plan, str]]) -> None:
    plan, urn = make()
    if rule == "storage-cluster-only":  # as the plan would record it: no dependency on the FSx group any more
        target = plan.by_urn()[urn]
        target.dependencies = [d for d in target.dependencies if d.endswith("::eks")]
    assert (rule, urn) not in flagged(plan)


def test_spot_is_fine_where_there_is_no_efa() -> None:
    """The EFA rules judge only the NodePools an EFA NodeSet lands on: prod's gpu-h100 pool, moved to spot,
    is flagged while its NodeSet asks for EFA interfaces, and not once it stops asking."""
    plan = copy.deepcopy(shipped_plan("prod"))
    pool = one(plan, NODE_POOL, "partition-gpu-h100-nodepool")
    _requirement(pool.inputs, "karpenter.sh/capacity-type")["values"] = ["spot"]
    assert ("efa-no-spot", pool.urn) in flagged(plan)
    (node_set,) = [r for r in plan.of_type("kubernetes:slinky.slurm.net/v1beta1:NodeSet")
                   if r.inputs["metadata"]["name"] == "gpu-h100"]
    for amounts in node_set.inputs["spec"]["slurmd"]["resources"].values():
        amounts.pop("vpc.amazonaws.com/efa")
    assert ("efa-no-spot", pool.urn) not in flagged(plan)


def test_only_s3_encryption_is_advisory() -> None:
    assert [r.name for r in RULES if r.enforcement is Enforcement.advisory] == ["s3-encrypted"]
