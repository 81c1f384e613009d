"""Every rule of the pack, and how the offline check runs them over a whole plan."""

from __future__ import annotations

from collections.abc import Sequence

from policy.model import Resource, ResourceRule, StackRule, Violation
from policy.rules import RESOURCE_RULES
from policy.stack_rules import STACK_RULES

RULES: tuple[ResourceRule | StackRule, ...] = (*RESOURCE_RULES, *STACK_RULES)


def evaluate(resources: Sequence[Resource]) -> list[Violation]:
    """All violations of all rules, resource rules first, each in resource order."""
    found = [v for rule in RESOURCE_RULES for r in resources for v in rule.evaluate(r)]
    return found + [v for rule in STACK_RULES for v in rule.evaluate(resources)]
