"""The rules as pulumi-policy policies, for `pulumi preview --policy-pack policy`.

Building these objects starts nothing; only `PolicyPack(...)` (in __main__.py) starts the analyzer server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from components.findings import Finding
from policy.model import UNKNOWN, Enforcement, ResourceRule, Rule, StackRule
from policy.ruleset import RULES

LEVELS = {Enforcement.mandatory: EnforcementLevel.MANDATORY, Enforcement.advisory: EnforcementLevel.ADVISORY}


@dataclass(frozen=True)
class PreviewResource:
    """A resource as `pulumi preview` shows it, in the shape the rules take (policy.model.Resource)."""

    urn: str
    type: str
    name: str
    inputs: Mapping[str, Any]
    dependencies: Sequence[str]


def plain(value: Any) -> Any:
    """pulumi-policy's props (proxies that raise on values unknown during preview) -> plain data with UNKNOWN."""
    if isinstance(value, Mapping):
        return {key: plain(_get(value, key)) for key in value}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [plain(_get(value, i)) for i in range(len(value))]
    return value


def _get(container: Any, key: Any) -> Any:
    try:
        return container[key]
    except UnknownValueError:
        return UNKNOWN


def _report(violations: list[Finding], report: ReportViolation, with_urn: bool) -> None:
    for v in violations:
        report(f"{v.message}. Fix: {v.fix}", v.urn if with_urn else None)


def config_schema(rule: Rule) -> PolicyConfigSchema | None:
    """What the pack's config (policy/config/<stack>.json) may set for this rule; Pulumi validates the file
    against it and fills in the defaults before the pack sees `args.get_config()`."""
    return PolicyConfigSchema(properties=dict(rule.config_schema)) if rule.config_schema else None


def resource_policy(rule: ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        resource = PreviewResource(args.urn, args.resource_type, args.name, plain(args.props), ())
        _report(rule.evaluate(resource, args.get_config()), report, with_urn=False)

    return ResourceValidationPolicy(name=rule.name, description=rule.description, validate=validate,
                                    enforcement_level=LEVELS[rule.enforcement], remediation_steps=rule.fix,
                                    config_schema=config_schema(rule))


def stack_policy(rule: StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        resources = [PreviewResource(r.urn, r.resource_type, r.name, plain(r.props),
                                     tuple(d.urn for d in r.dependencies)) for r in args.resources]
        _report(rule.evaluate(resources), report, with_urn=True)

    return StackValidationPolicy(name=rule.name, description=rule.description, validate=validate,
                                 enforcement_level=LEVELS[rule.enforcement], remediation_steps=rule.fix)


def policies() -> list[Policy]:
    return [resource_policy(r) if isinstance(r, ResourceRule) else stack_policy(r) for r in RULES]
