"""What RBAC cannot say about the repair agent: it may patch nodes and delete NodeClaims (components/lifecycle/
node_repair.py cluster_rules), but RBAC grants a verb on every object of a resource. A ValidatingAdmissionPolicy
narrows that, for the agent's service account alone, to what the agent does:

- a node update changes nothing but the Slinky topology annotation (slurm/agent/topology: a merge patch of
  metadata.annotations), and only on a node of a Slurm partition: no label, taint, spec or other annotation of any
  node, so a compromised agent cannot steer pods onto or off nodes;
- a NodeClaim it deletes is one of a Slurm partition's NodePools: never the system, login or Kubernetes pools' nodes.

A node or NodeClaim belongs to a partition by Karpenter's own label `karpenter.sh/nodepool` (Karpenter v1
NodePoolLabelKey, set on every NodeClaim and node it makes; a partition's NodePool is named after the partition,
components/compute/nodepools.py), which the agent cannot change under this policy. Evaluated offline the same way
(scripts/checks/admission_policy.py, plain CEL with has()).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config.cluster import ClusterConfig
from components.names import SLURM_NAMESPACE
from slurm.agent import contract

POLICY = "slurm-eks-repair-scope"
NODEPOOL_LABEL = "karpenter.sh/nodepool"


def repair_user(name: str) -> str:
    return f"system:serviceaccount:{SLURM_NAMESPACE}:{name}"


def _in_partition(obj: str, partitions: list[str]) -> str:
    quoted = "[" + ", ".join(f"'{p}'" for p in sorted(partitions)) + "]"
    return (f"(has({obj}.metadata.labels) && '{NODEPOOL_LABEL}' in {obj}.metadata.labels && "
            f"{obj}.metadata.labels['{NODEPOOL_LABEL}'] in {quoted})")


def _map(obj: str, field: str) -> str:
    return f"(has({obj}.metadata.{field}) ? {obj}.metadata.{field} : {{}})"


def policy_spec(config: ClusterConfig, service_account: str) -> dict[str, Any]:
    partitions = list(config.partitions)
    annotation = contract.TOPOLOGY_ANNOTATION
    new, old = _map("object", "annotations"), _map("oldObject", "annotations")
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]},
            {"apiGroups": ["karpenter.sh"], "apiVersions": ["v1"], "operations": ["DELETE"],
             "resources": ["nodeclaims"]},
        ]},
        "matchConditions": [{"name": "repair-agent",
                             "expression": f"request.userInfo.username == '{repair_user(service_account)}'"}],
        "validations": [
            {"expression": f"request.resource.resource != 'nodes' || {_in_partition('oldObject', partitions)}",
             "message": "the repair agent may change Slurm partitions' nodes only"},
            {"expression": "request.resource.resource != 'nodes' || (object.spec == oldObject.spec && "
                           f"{_map('object', 'labels')} == {_map('oldObject', 'labels')} && "
                           f"{new}.all(k, k == '{annotation}' || (k in {old} && {old}[k] == {new}[k])) && "
                           f"{old}.all(k, k == '{annotation}' || k in {new}))",
             "message": f"the repair agent may change a node's {annotation} annotation only (no label, taint or "
                        "other annotation)"},
            {"expression": f"request.resource.resource != 'nodeclaims' || {_in_partition('oldObject', partitions)}",
             "message": "the repair agent may delete Slurm partitions' NodeClaims only"},
        ],
    }


def repair_scope_policy(name: str, config: ClusterConfig, service_account: str, opts: pulumi.ResourceOptions
                        ) -> list[pulumi.Resource]:
    """The policy and its binding; the agent's RBAC binding waits for both."""
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
        name, metadata={"name": POLICY}, spec=policy_spec(config, service_account), opts=opts)
    binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        f"{name}-binding", metadata={"name": POLICY}, spec={"policyName": POLICY, "validationActions": ["Deny"]},
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[policy])))
    return [policy, binding]
