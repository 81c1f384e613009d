"""`slurm-eks preflight --stack S`: can this AWS account deploy the stack? Registered by scripts/cli/main.py with
`app.command()(preflight)`.

Exit status: 0 nothing failed (warnings allowed), 1 a check failed, 2 preflight could not run (bad stack
config, no credentials, unreachable endpoint).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, load_stack
from scripts.preflight.checks import CHECKS
from scripts.preflight.runner import AwsUnavailable, CheckResult, Identity, failed, open_session, run_checks

CANNOT_RUN_EXIT = 2
STYLE = {"pass": "green", "warn": "yellow", "fail": "red"}


def preflight(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
    profile: Annotated[str | None, typer.Option(help="AWS profile (default: the standard credential chain)")] = None,
) -> None:
    """Ask the AWS account, read-only, whether the stack can deploy: instance offerings per zone, EFA, vCPU
    quotas, capacity reservations, S3 buckets, Kubernetes version. Exit 1 when a check fails."""
    out, err = Console(), Console(stderr=True)  # made per run so COLUMNS/NO_COLOR of this run apply
    try:
        config, _ = load_stack(stack, stacks_dir)  # `slurm-eks validate` prints the warnings
    except ConfigError as exc:
        err.print(exc.render(), markup=False, highlight=False)
        raise typer.Exit(CANNOT_RUN_EXIT) from None
    try:
        session, identity = open_session(config.region, profile)
        with err.status(f"checking account {identity.account} in {identity.region} ..."):
            results = run_checks(session, config, CHECKS)
    except AwsUnavailable as exc:
        err.print(f"[red]error:[/] {exc}", highlight=False)
        err.print("set AWS credentials (aws configure, AWS_PROFILE, or --profile) and check the network; "
                  "preflight only reads", highlight=False)
        raise typer.Exit(CANNOT_RUN_EXIT) from None
    out.print(results_table(stack, identity, results))
    counts = {s: sum(r.status == s for r in results) for s in STYLE}
    out.print(", ".join(f"[{STYLE[s]}]{n} {s}[/]" for s, n in counts.items()), highlight=False)
    if failed(results):
        raise typer.Exit(1)


def results_table(stack: str, identity: Identity, results: list[CheckResult]) -> Table:
    table = Table(title=f"preflight {stack}: account {identity.account}, {identity.region}", title_justify="left")
    for column in ("check", "subject", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for r in results:
        # Text, not markup: AWS messages carry brackets such as "[p9.48xlarge]"
        table.add_row(r.check, Text(r.subject), Text(r.status, style=STYLE[r.status]), Text(r.detail), Text(r.fix))
    return table
