"""`slurm-eks policy`: the policy pack's rules, run offline on a stack's plan (no credentials, no server)."""

from __future__ import annotations

from pathlib import Path

from policy.model import Enforcement, Violation
from policy.ruleset import RULES, evaluate
from scripts.checks.findings import resource_label
from scripts.offline.plan_model import Plan


def check_plan(plan: Plan) -> list[Violation]:
    return evaluate(plan.resources)


def check_stack(stack: str, stacks_dir: Path) -> tuple[Plan, list[Violation]]:
    """Plan the stack under mocks (raises ConfigError for a bad config), then check it."""
    from scripts.offline.plan import run_plan  # imports Pulumi: only when a plan is made here

    plan, _ = run_plan(stack, stacks_dir)
    return plan, check_plan(plan)


def blocking(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if v.rule.enforcement is Enforcement.mandatory]


def render(violations: list[Violation]) -> str:
    """One block per violation: rule and resource, what is wrong, how to fix it."""
    blocks = [f"{v.rule.enforcement}[{v.rule.name}] {resource_label(v.urn)}\n    {v.message}\n    fix: {v.rule.fix}"
              for v in violations]
    return "".join(b + "\n" for b in blocks)


def summary(plan: Plan, violations: list[Violation]) -> str:
    mandatory = len(blocking(violations))
    return (f"stack {plan.stack}: {mandatory} mandatory and {len(violations) - mandatory} advisory violations "
            f"({len(RULES)} rules, {len(plan.resources)} resources)")
