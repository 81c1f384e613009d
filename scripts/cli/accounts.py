"""`slurm-eks accounts ...`: the stack's Slurm accounts, users and QoS (registered by scripts/cli/main.py).

`desired` renders the document a stack declares; `plan` and `apply` reconcile a cluster's slurmdbd to such a
document with sacctmgr (where the Slurm client commands reach it: a login pod, or the local Slurm). The work is
in slurm/agent/accounts/, which the in-cluster Job runs as `python3 -m slurm.agent.accounts`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, load_stack
from components.findings import Finding
from scripts.cli.problems import err, fail_config, print_findings
from slurm.agent.accounts.desired import DocumentError
from slurm.agent.accounts.errors import AccountsError
from slurm.agent.accounts.reconcile import apply_file, plan_file

accounts_app = typer.Typer(help="Slurm accounts, users and QoS as the stack declares them (sacctmgr).",
                           no_args_is_help=True)
DesiredOpt = Annotated[Path, typer.Option("--desired", exists=True, dir_okay=False,
                                          help="the desired-state document (`slurm-eks accounts desired`)")]


def document_finding(exc: DocumentError) -> Finding:
    """A document the reconcile cannot read, as a finding. slurm.accounts ships as source into the cluster (the
    login image's python3, standard library only, and the plan's ConfigMaps), so it cannot import the finding
    type: the conversion is here, and its message names the keys (`accounts.a.Parent: no account 'x'; ...`)."""
    return Finding(rule="accounts-document", severity="error", message=str(exc),
                   fix="write the document with `slurm-eks accounts desired --stack S` (the stack's team rules "
                       "validate what it declares)")


def _failed(exc: AccountsError) -> typer.Exit:
    if isinstance(exc, DocumentError):
        print_findings([document_finding(exc)])
    else:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
    return typer.Exit(1)


@accounts_app.command()
def desired(
    stack: Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")],
    stacks_dir: Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")] = STACKS_DIR,
) -> None:
    """Print the desired-state document of a stack (what its reconcile Job applies)."""
    try:
        config, _ = load_stack(stack, stacks_dir)
    except ConfigError as exc:
        raise fail_config(exc) from None
    from components.slinky.accounts_document import desired_json  # the config models: only once a stack is read

    typer.echo(desired_json(config, config.name_for(stack)), nl=False)


@accounts_app.command()
def plan(desired: DesiredOpt) -> None:
    """What `apply` would change, read from slurmdbd with sacctmgr; changes nothing."""
    try:
        typer.echo(plan_file(desired), nl=False)
    except AccountsError as exc:
        raise _failed(exc) from None


@accounts_app.command()
def apply(desired: DesiredOpt) -> None:
    """Make slurmdbd match the document with `sacctmgr --immediate`; exit 1 with sacctmgr's message on failure."""
    try:
        apply_file(desired, typer.echo)
    except AccountsError as exc:
        raise _failed(exc) from None
