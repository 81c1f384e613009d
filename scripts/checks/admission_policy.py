"""ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1) evaluated offline, as the API server runs them
(kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy): matchConstraints and the binding's
matchResources select the request, matchConditions must all hold, variables are evaluated in order, and each
validation that is false, or fails to evaluate under failurePolicy Fail, rejects it when the binding's
validationActions include Deny. CEL: scripts/manifests/cel_rules.py. Only what a plan's policies use is modelled:
namespaceSelector and objectSelector-free resourceRules; `object` and `oldObject` (null on CREATE and DELETE
respectively, as the API server binds them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from celpy import celtypes

from scripts.manifests.cel_rules import evaluate


@dataclass(frozen=True)
class Request:
    """The parts of an admission request our policies read: `request.*` and the namespace's labels."""

    operation: str  # CREATE, UPDATE, DELETE
    resource: str  # e.g. "pods", "pods/ephemeralcontainers"
    username: str
    namespace_labels: Mapping[str, str]
    group: str = ""  # the API group: "" (core), "karpenter.sh"

    def binding(self) -> dict[str, Any]:
        resource, _, sub = self.resource.partition("/")
        return {"operation": self.operation, "subResource": sub, "resource": {"resource": resource},
                "userInfo": {"username": self.username}}


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions); none or empty selects everything."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        held = {"In": key in labels and labels[key] in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}[operator]
        if not held:
            return False
    return True


def _rule_matches(rule: Mapping[str, Any], request: Request) -> bool:
    return (set(rule.get("operations") or []) & {request.operation, "*"} != set()
            and set(rule.get("resources") or []) & {request.resource, "*"} != set()
            and set(rule.get("apiGroups") or []) & {request.group, "*"} != set())


def applies(policy: Mapping[str, Any], binding: Mapping[str, Any], request: Request) -> bool:
    """Whether the policy, through this binding, sees the request (before matchConditions)."""
    constraints = policy["spec"].get("matchConstraints") or {}
    resources = binding["spec"].get("matchResources") or {}
    return (binding["spec"].get("policyName") == policy["metadata"]["name"]
            and any(_rule_matches(r, request) for r in constraints.get("resourceRules") or [])
            and selects(constraints.get("namespaceSelector"), request.namespace_labels)
            and selects(resources.get("namespaceSelector"), request.namespace_labels))


def rejections(policy: Mapping[str, Any], binding: Mapping[str, Any], obj: Mapping[str, Any] | None,
               request: Request, old: Mapping[str, Any] | None = None) -> list[str]:
    """Why the API server would deny `obj` (the object after the request; `old`, before it; empty: admitted, or not
    this policy's business)."""
    spec = policy["spec"]
    if not applies(policy, binding, request) or "Deny" not in binding["spec"].get("validationActions", []):
        return []
    fail = spec.get("failurePolicy", "Fail") == "Fail"
    bindings: dict[str, Any] = {"object": obj, "oldObject": old, "request": request.binding()}
    try:
        if not all(evaluate(c["expression"], bindings) for c in spec.get("matchConditions") or []):
            return []
        variables = celtypes.MapType()
        for variable in spec.get("variables") or []:
            variables[celtypes.StringType(variable["name"])] = evaluate(
                variable["expression"], {**bindings, "variables": variables})
    except ValueError as exc:
        return [f"{policy['metadata']['name']}: {exc}"] if fail else []
    found = []
    for validation in spec.get("validations") or []:
        try:
            held = evaluate(validation["expression"], {**bindings, "variables": variables})
        except ValueError as exc:
            held = not fail
            message = str(exc)
        else:
            message = validation.get("message") or f"failed expression: {validation['expression']}"
        if not held:
            found.append(f"{policy['metadata']['name']}: {message}")
    return found
