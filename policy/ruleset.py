"""Every rule of the pack, and how the offline check runs them over a whole plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from components.findings import Finding
from policy.isolation_rules import ISOLATION_RESOURCE_RULES, ISOLATION_STACK_RULES
from policy.model import SEVERITY, Resource, ResourceRule, StackRule
from policy.pack_config import PackConfig, parse
from policy.rules import RESOURCE_RULES
from policy.stack_rules import STACK_RULES

RULES: tuple[ResourceRule | StackRule, ...] = (*RESOURCE_RULES, *ISOLATION_RESOURCE_RULES, *STACK_RULES,
                                               *ISOLATION_STACK_RULES)


def evaluate(resources: Sequence[Resource], config: PackConfig | None = None) -> list[Finding]:
    """All violations of all rules, resource rules first, each in resource order. `config` (the stack's pack
    config; default: none) disables rules, sets their levels (a violation's severity: error for mandatory, warning
    for advisory) and their settings, as Pulumi does online."""
    config = config or parse({}, RULES)
    found = []
    for rule in RULES:
        level = config.level(rule)
        if level is None:
            continue
        if isinstance(rule, ResourceRule):
            violations = [v for r in resources for v in rule.evaluate(r, config.settings_of(rule))]
        else:
            violations = rule.evaluate(resources)
        found += [replace(v, severity=SEVERITY[level]) for v in violations]
    return found
