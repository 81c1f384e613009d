"""`slurm-eks policy --stack S`: the policy pack offline. Registered by scripts/cli/main.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR
from policy.pack_config import PackConfigError
from scripts.checks.policy import blocking, check_plan, check_stack, pack_config, summary
from scripts.cli.problems import CONFIG_ERROR_EXIT, Format, FormatOpt, PlanDirOpt, fail_config, load_plan_of, report


def policy(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
    policy_pack_config: Annotated[Path | None, typer.Option(
        help="the pack's config for this stack, as `pulumi preview --policy-pack-config` takes it "
             "[default: policy/config/<stack>.json if it exists]")] = None,
    format: FormatOpt = Format.text,
    plan_dir: PlanDirOpt = None,
) -> None:
    """Plan the stack offline and check it against the policy pack (policy/) and its config for the stack;
    exit 1 on a mandatory violation (severity error; an advisory one is a warning)."""
    try:
        if plan_dir is None:
            plan, config, violations = check_stack(stack, stacks_dir, policy_pack_config)
        else:
            plan, config = load_plan_of(stack, plan_dir), pack_config(stack, policy_pack_config)
            violations = check_plan(plan, config)
    except ConfigError as exc:
        raise fail_config(exc, format) from None
    except (PackConfigError, OSError) as exc:
        typer.echo(f"policy pack config: {exc}", err=True)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    report(violations, format, summary(plan, config, violations), stack=stack,
           packConfig=str(config.source) if config.source else None)
    if blocking(violations):
        raise typer.Exit(1)
