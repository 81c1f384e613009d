"""What a Kubernetes LabelSelector and a NetworkPolicy's policyTypes mean (networking.k8s.io/v1 and
meta/v1 LabelSelector, kubernetes.io/docs/concepts/overview/working-with-objects/labels/ and
kubernetes.io/docs/concepts/services-networking/network-policies/), read once for both the deploy check
(scripts/checks/pod_flows.py) and the twin that enforces the policies (scripts/twin/policy.py). No Pulumi."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Labels = Mapping[str, str]


def selects(selector: Mapping[str, Any] | None, labels: Labels) -> bool:
    """A LabelSelector: matchLabels AND matchExpressions; an empty selector selects everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        ok = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


def policy_types(spec: Mapping[str, Any]) -> list[str]:
    # Unset: Ingress always, Egress when the policy has egress rules (NetworkPolicySpec.policyTypes).
    return list(spec.get("policyTypes") or (["Ingress", *(["Egress"] if spec.get("egress") else [])]))
