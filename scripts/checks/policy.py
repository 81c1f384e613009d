"""`slurm-eks policy`: the policy pack's rules, run offline on a stack's plan (no credentials, no server), with
the pack's config for that stack (policy/config/<stack>.json), the file `pulumi preview` is given too."""

from __future__ import annotations

from pathlib import Path

from components.findings import Finding, errors
from policy.pack_config import PackConfig, for_stack
from policy.ruleset import RULES, evaluate
from scripts.offline.plan_model import Plan


def pack_config(stack: str, path: Path | None = None) -> PackConfig:
    """`path`, else policy/config/<stack>.json if the pack has one (raises PackConfigError for a bad file)."""
    return for_stack(stack, RULES, path)


def check_plan(plan: Plan, config: PackConfig | None = None) -> list[Finding]:
    return evaluate(plan.resources, config)


def check_stack(stack: str, stacks_dir: Path, config_path: Path | None = None
                ) -> tuple[Plan, PackConfig, list[Finding]]:
    """Read the pack's config, plan the stack under mocks (raises ConfigError for a bad config), check it."""
    from scripts.offline.plan import run_plan  # imports Pulumi: only when a plan is made here

    config = pack_config(stack, config_path)
    plan, _ = run_plan(stack, stacks_dir)
    return plan, config, check_plan(plan, config)


def blocking(violations: list[Finding]) -> list[Finding]:
    """The mandatory violations (severity error): they block `pulumi preview/up`."""
    return errors(violations)


def summary(plan: Plan, config: PackConfig, violations: list[Finding]) -> str:
    mandatory = len(blocking(violations))
    source = f"pack config {config.source}" if config.source else "no pack config"
    return (f"stack {plan.stack}: {mandatory} mandatory and {len(violations) - mandatory} advisory violations "
            f"({len(RULES)} rules, {len(plan.resources)} resources, {source})")
