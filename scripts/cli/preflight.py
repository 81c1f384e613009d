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
from rich.markup import escape

from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, load_stack
from components.findings import Finding
from scripts.cli.problems import Format, FormatOpt, fail_config, report

CANNOT_RUN_EXIT = 2
COUNTED = {"info": "pass", "warning": "warn", "error": "fail"}  # a check's outcome, by its finding's severity


def preflight(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
    profile: Annotated[str | None, typer.Option(help="AWS profile (default: the standard credential chain)")] = None,
    format: FormatOpt = Format.text,
) -> None:
    """Ask the AWS account, read-only, whether the stack can deploy: instance offerings per zone, EFA, vCPU
    quotas, capacity reservations, S3 buckets, Kubernetes version. Exit 1 when a check fails."""
    from scripts.preflight.checks import CHECKS  # boto3 and the checks: not for --help
    from scripts.preflight.runner import AwsUnavailable, failed, open_session, run_checks

    err = Console(stderr=True)  # made per run so COLUMNS/NO_COLOR of this run apply
    try:
        config, _ = load_stack(stack, stacks_dir)  # `slurm-eks validate` prints the warnings
    except ConfigError as exc:
        raise fail_config(exc, format) from None  # exit 2: CANNOT_RUN_EXIT
    try:
        session, identity = open_session(config.region, profile)
        with err.status(f"checking account {identity.account} in {identity.region} ..."):
            results = run_checks(session, config, CHECKS)
    except AwsUnavailable as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        err.print("set AWS credentials (aws configure, AWS_PROFILE, or --profile) and check the network; "
                  "preflight only reads", highlight=False)
        raise typer.Exit(CANNOT_RUN_EXIT) from None
    if format is not Format.json:
        typer.echo(f"preflight {stack}: account {identity.account}, {identity.region}")
    report(results, format, outcome(results), stack=stack, account=identity.account, region=identity.region)
    if failed(results):
        raise typer.Exit(1)


def outcome(results: list[Finding]) -> str:
    """"12 pass, 1 warn, 0 fail": each check's finding counted by its severity."""
    return ", ".join(f"{sum(r.severity == s for r in results)} {word}" for s, word in COUNTED.items())
