"""`slurm-eks policy`: the policy pack's rules, run offline on a stack's plan (no credentials, no server), with
the pack's config for that stack (policy/config/<stack>.json), the file `pulumi preview` is given too."""

from __future__ import annotations

from pathlib import Path

from policy.model import Enforcement, Violation
from policy.pack_config import PackConfig, for_stack
from policy.ruleset import RULES, evaluate
from scripts.checks.findings import resource_label
from scripts.offline.plan_model import Plan


def pack_config(stack: str, path: Path | None = None) -> PackConfig:
    """`path`, else policy/config/<stack>.json if the pack has one (raises PackConfigError for a bad file)."""
    return for_stack(stack, RULES, path)


def check_plan(plan: Plan, config: PackConfig | None = None) -> list[Violation]:
    return evaluate(plan.resources, config)


def check_stack(stack: str, stacks_dir: Path, config_path: Path | None = None
                ) -> tuple[Plan, PackConfig, list[Violation]]:
    """Read the pack's config, plan the stack under mocks (raises ConfigError for a bad config), check it."""
    from scripts.offline.plan import run_plan  # imports Pulumi: only when a plan is made here

    config = pack_config(stack, config_path)
    plan, _ = run_plan(stack, stacks_dir)
    return plan, config, check_plan(plan, config)


def blocking(violations: list[Violation]) -> list[Violation]:
    return [v for v in violations if v.enforcement is Enforcement.mandatory]


def render(violations: list[Violation]) -> str:
    """One block per violation: rule and resource, what is wrong, how to fix it."""
    blocks = [f"{v.enforcement}[{v.rule.name}] {resource_label(v.urn)}\n    {v.message}\n    fix: {v.rule.fix}"
              for v in violations]
    return "".join(b + "\n" for b in blocks)


def summary(plan: Plan, config: PackConfig, violations: list[Violation]) -> str:
    mandatory = len(blocking(violations))
    source = f"pack config {config.source}" if config.source else "no pack config"
    return (f"stack {plan.stack}: {mandatory} mandatory and {len(violations) - mandatory} advisory violations "
            f"({len(RULES)} rules, {len(plan.resources)} resources, {source})")
