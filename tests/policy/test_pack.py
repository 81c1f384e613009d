"""The online pack: each rule wrapped as pulumi-policy's ResourceValidationPolicy or StackValidationPolicy,
called as the analyzer calls it (inputs through the wire format and pulumi-policy's unknown-checking
proxy), without PolicyPack(...) and its server."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UNKNOWN_ARRAY_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.pack import policies
from policy.ruleset import RULES, evaluate
from scripts.offline.plan_model import Plan, PlannedResource
from tests.plan.fixtures import one, shipped_plan
from tests.policy.broken import CASES, EKS, Case

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

Reports = list[tuple[str, str | None]]


def wire_props(inputs: dict[str, Any]) -> Any:
    """Inputs as Analyze hands them to a policy: protobuf Struct -> deserialized -> unknown-checking proxy."""
    struct = struct_pb2.Struct()
    struct.update(inputs)
    return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct)))


def _options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def run_resource_policy(policy: ResourceValidationPolicy, r: PlannedResource, props: Any = None) -> Reports:
    reports: Reports = []
    args = ResourceValidationArgs(r.type, wire_props(r.inputs) if props is None else props, r.urn, r.name,
                                  _options(), None)
    policy.validate(args, lambda message, urn=None: reports.append((message, urn)))
    return reports


def run_stack_policy(policy: StackValidationPolicy, plan: Plan, props: dict[str, Any] | None = None) -> Reports:
    # As AnalyzeStack builds them: resources first, then dependencies resolved to the resource objects.
    props = props or {r.urn: wire_props(r.inputs) for r in plan.resources}
    resources = {r.urn: PolicyResource(r.type, props[r.urn], r.urn, r.name, _options(), None, None, [], {})
                 for r in plan.resources}
    for r in plan.resources:
        resources[r.urn].dependencies.extend(resources[d] for d in r.dependencies if d in resources)
    reports: Reports = []
    policy.validate(StackValidationArgs(list(resources.values())),
                    lambda message, urn=None: reports.append((message, urn)))
    return reports


def run_pack(plan: Plan) -> dict[str, Reports]:
    # Each resource's inputs cross the wire format once; every policy reads the same read-only proxy of them.
    props = {r.urn: wire_props(r.inputs) for r in plan.resources}
    found: dict[str, Reports] = {}
    for policy in policies():
        if isinstance(policy, ResourceValidationPolicy):
            found[policy.name] = [(m, r.urn) for r in plan.resources
                                  for m, _ in run_resource_policy(policy, r, props[r.urn])]
        else:
            found[policy.name] = run_stack_policy(policy, plan, props)
    return found


def test_pack_has_every_rule_with_its_enforcement() -> None:
    levels = {p.name: p.enforcement_level for p in policies()}
    assert levels == {r.name: EnforcementLevel(r.enforcement.value) for r in RULES}
    assert all(p.remediation_steps for p in policies())


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_pack_passes_the_shipped_stacks(stack: str) -> None:
    # Without its pack config a stack fails only the rules that config waives (the EBS CSI add-on's version)
    # or lists exceptions for (privileged namespaces); test_waivers.py runs the pack with the config.
    found = {name for name, reports in run_pack(shipped_plan(stack)).items() if reports}
    assert found == {"eks-addon-pinned", "namespace-pod-security"}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_pack_reports_what_the_offline_check_reports(case: Case) -> None:
    plan, urn = case.make()
    online = {(name, urn_, message) for name, reports in run_pack(plan).items() for message, urn_ in reports}
    offline = {(v.rule, v.urn, f"{v.message}. Fix: {v.fix}") for v in evaluate(plan.resources)}
    assert online == offline
    assert case.rule in {name for name, flagged_urn, _ in online if flagged_urn == urn}


def test_values_unknown_during_preview_are_not_violations() -> None:
    """In preview a KMS key's ARN or the API CIDRs may be unknown; the proxy raises on them, the pack must not."""
    eks = one(shipped_plan("prod"), EKS)
    inputs = {**eks.inputs, "encryptionConfigKeyArn": UNKNOWN_STRING_VALUE, "endpointPublicAccess": True,
              "publicAccessCidrs": UNKNOWN_ARRAY_VALUE}
    for policy in policies():
        if isinstance(policy, ResourceValidationPolicy):
            assert run_resource_policy(policy, eks, wire_props(inputs)) == [], policy.name
