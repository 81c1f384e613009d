"""The repair agent's admission policy (components/lifecycle/repair_scope.py), from the prod plan, evaluated as the API
server would (scripts/checks/admission_policy.py): the topology annotation on a partition's node and the deletion
of a partition's NodeClaim pass; every other change the agent's RBAC would allow is denied, and other users are
not this policy's business."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.lifecycle.node_repair import NAME
from components.lifecycle.repair_scope import POLICY, repair_user
from scripts.checks.admission_policy import Request, rejections
from slurm.agent.contract import TOPOLOGY_ANNOTATION
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import objects

AGENT = repair_user(NAME)


def policy() -> tuple[dict[str, Any], dict[str, Any]]:
    plan = shipped_plan("prod")
    return (objects(plan, "ValidatingAdmissionPolicy")[POLICY],
            objects(plan, "ValidatingAdmissionPolicyBinding")[POLICY])


def node(pool: str = "gpu-h100") -> dict[str, Any]:
    return {"metadata": {"name": "ip-10-0-1-1.ec2.internal",
                         "labels": {"karpenter.sh/nodepool": pool, "node.slurm-eks.io/partition": pool},
                         "annotations": {"karpenter.sh/nodepool-hash": "1"}},
            "spec": {"providerID": "aws:///us-west-2a/i-0abc", "taints": [{"key": "nvidia.com/gpu",
                                                                           "effect": "NoSchedule"}]}}


def update(old: dict[str, Any], change: Any, user: str = AGENT) -> list[str]:
    new = copy.deepcopy(old)
    change(new)
    spec, binding = policy()
    return rejections(spec, binding, new, Request("UPDATE", "nodes", user, {}), old)


def delete_claim(pool: str, user: str = AGENT) -> list[str]:
    claim = {"metadata": {"name": f"{pool}-x7k2p", "labels": {"karpenter.sh/nodepool": pool}}, "spec": {}}
    spec, binding = policy()
    return rejections(spec, binding, None, Request("DELETE", "nodeclaims", user, {}, "karpenter.sh"), claim)


def _annotate(n: dict[str, Any]) -> None:
    n["metadata"]["annotations"][TOPOLOGY_ANNOTATION] = '{"tier1": "nn-1"}'


def test_what_the_agent_does_is_admitted() -> None:
    assert update(node(), _annotate) == []
    assert delete_claim("trainium") == []


@pytest.mark.parametrize(("change", "message"), [
    (lambda n: n["metadata"]["labels"].update({"node.slurm-eks.io/partition": "gpu-a100"}), "annotation only"),
    (lambda n: n["spec"].update(taints=[]), "annotation only"),
    (lambda n: n["spec"].update(unschedulable=True), "annotation only"),
    (lambda n: n["metadata"]["annotations"].update({"karpenter.sh/do-not-disrupt": "true"}), "annotation only"),
    (lambda n: n["metadata"]["annotations"].pop("karpenter.sh/nodepool-hash"), "annotation only"),
])
def test_any_other_change_to_a_node_is_denied(change: Any, message: str) -> None:
    assert any(message in r for r in update(node(), change))


def test_nodes_and_nodeclaims_outside_the_partitions_are_out_of_reach() -> None:
    assert any("Slurm partitions' nodes only" in r for r in update(node("system"), _annotate))
    assert any("Slurm partitions' NodeClaims only" in r for r in delete_claim("ml-h100"))
    assert any("Slurm partitions' NodeClaims only" in r for r in delete_claim("system"))


def test_other_users_are_not_this_policys_business() -> None:
    admin = "kubernetes-admin"
    assert update(node("system"), lambda n: n["spec"].update(taints=[]), user=admin) == []
    assert delete_claim("system", user="system:serviceaccount:kube-system:karpenter") == []
