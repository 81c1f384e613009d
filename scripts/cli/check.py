"""`slurm-eks check --stack S`: the deploy check on the offline plan. Registered by scripts/cli/main.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, load_stack
from components.findings import errors
from scripts.cli.problems import Format, FormatOpt, PlanDirOpt, fail_config, load_plan_of, report


def check(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
    format: FormatOpt = Format.text,
    plan_dir: PlanDirOpt = None,
) -> None:
    """Will `pulumi up` give a working cluster? Plan offline, then check who can reach whom (network), who
    may do what (iam) and what exists before what (order); exit 1 on an error."""
    from scripts.checks.deploy import RULES, check_plan, check_stack, summary  # a second of imports: not for --help

    try:
        if plan_dir is None:
            plan, findings = check_stack(stack, stacks_dir)
        else:
            plan = load_plan_of(stack, plan_dir)
            findings = check_plan(plan, load_stack(stack, stacks_dir)[0])
    except ConfigError as exc:
        raise fail_config(exc, format) from None
    report(findings, format, summary(plan, findings), stack=stack, rules=list(RULES))
    if errors(findings):
        raise typer.Exit(1)
