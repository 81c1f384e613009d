"""`slurm-eks policy --stack S`: the policy pack offline. Registered by scripts/cli/main.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from components.problems import ConfigError
from components.stackfile import STACKS_DIR
from scripts.checks.policy import blocking, check_stack, render, summary
from scripts.cli.problems import fail_config


def policy(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
) -> None:
    """Plan the stack offline and check it against the policy pack (policy/); exit 1 on a mandatory violation."""
    try:
        plan, violations = check_stack(stack, stacks_dir)
    except ConfigError as exc:
        raise fail_config(exc) from None
    typer.echo(render(violations), nl=False)
    typer.echo(summary(plan, violations))
    if blocking(violations):
        raise typer.Exit(1)
