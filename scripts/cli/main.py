"""`slurm-eks`: the one command-line tool (plan, diff, validate, ...)."""

from __future__ import annotations

import errno
import json
import os
from collections import Counter, defaultdict
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from rich.tree import Tree

from components.config.problems import ConfigError, plural
from components.config.stack_secrets import secrets_provider_problems
from components.config.stackfile import STACKS_DIR, load_stack, stack_file
from components.findings import Finding
from scripts.cli.accounts import accounts_app
from scripts.cli.advise import advise
from scripts.cli.check import check
from scripts.cli.ckpt import ckpt_app
from scripts.cli.cost import cost
from scripts.cli.data import data_app
from scripts.cli.gitops import gitops_app
from scripts.cli.k8s import k8s_app
from scripts.cli.lifecycle import changes, destroy, init, login, preview, up
from scripts.cli.policy import policy
from scripts.cli.preflight import preflight
from scripts.cli.problems import (
    CONFIG_ERROR_EXIT,
    INTERRUPTED_EXIT,
    Format,
    FormatOpt,
    err,
    fail_config,
    print_findings,
    report,
)
from scripts.cli.slurm import job_app, local_app
from scripts.cost.price_table import PriceTable
from scripts.cost.render import plan_cost_change, plan_cost_change_json
from scripts.offline.diff import across_stacks as across
from scripts.offline.diff import diff_json, diff_plans, render_markdown, render_text
from scripts.offline.plan_model import Plan

# add_completion: Typer's own --install-completion and --show-completion; `slurm-eks completion SHELL` below.
app = typer.Typer(add_completion=True, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Slurm on Amazon EKS: plan offline, validate, diff, and run jobs.")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"slurm-eks {version('slurm-eks')}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                help="print the version and exit")] = False) -> None:
    """Slurm on Amazon EKS: plan offline, validate, diff, and run jobs."""
app.add_typer(local_app, name="local")
app.add_typer(job_app, name="job")
app.add_typer(data_app, name="data")
app.add_typer(accounts_app, name="accounts")
app.add_typer(gitops_app, name="gitops")
app.add_typer(k8s_app, name="k8s")
app.add_typer(ckpt_app, name="ckpt")
app.command()(preflight)
app.command()(policy)
app.command()(check)
app.command()(advise)
app.command()(cost)
app.command()(preview)
app.command()(up)
app.command()(changes)
app.command()(destroy)
app.command()(init)
app.command()(login)
out = Console(soft_wrap=True)

StackOpt = Annotated[str, typer.Option("--stack", "-s", help="stack name: stacks/Pulumi.<stack>.yaml")]
StacksDirOpt = Annotated[Path, typer.Option(help="directory holding the Pulumi.<stack>.yaml files")]


class DiffFormat(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


@app.command()
def completion(shell: Annotated[Shell, typer.Argument(help="the shell to complete in")]) -> None:
    """Print the shell's completion script: `eval "$(slurm-eks completion bash)"` in ~/.bashrc, `slurm-eks
    completion fish > ~/.config/fish/completions/slurm-eks.fish`, `eval "$(slurm-eks completion zsh)"` in ~/.zshrc."""
    # Typer's own script generator (what --show-completion prints for the detected shell; typer is pinned, 0.29.1).
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="slurm-eks", complete_var="_SLURM_EKS_COMPLETE", shell=shell.value))


@app.command()
def validate(
    stack: StackOpt,
    stacks_dir: StacksDirOpt = STACKS_DIR,
    crds: Annotated[list[Path] | None, typer.Option(
        help="also plan offline and validate every manifest against the CRDs in this directory "
             "(repeatable) and the core Kubernetes schemas", exists=True, file_okay=False)] = None,
    format: FormatOpt = Format.text,
) -> None:
    """Check a stack's config against every rule, and that its file names a KMS secrets provider; exit 2
    listing all problems."""
    try:
        config, warnings = load_stack(stack, stacks_dir)
    except ConfigError as exc:
        raise fail_config(exc, format) from None
    provider = secrets_provider_problems(stack_file(stack, stacks_dir))
    if provider:
        headline = f"{stack_file(stack, stacks_dir)}: {plural(len(provider), 'error')} in the stack file"
        _fail(warnings + provider, format, headline, stack)
    summary = f"{plural(len(config.partitions), 'partition')}, {plural(len(warnings), 'warning')}"
    if crds:
        checked, problems = _validate_manifests(stack, stacks_dir, crds)
        if problems:
            _fail(warnings + problems, format, f"stack {stack}: {plural(len(problems), 'manifest problem')}", stack)
        summary += f", {plural(checked, 'manifest')} valid against {', '.join(map(str, crds))}"
    if format is not Format.text:
        report(warnings, format, f"stack {stack}: valid ({summary})", stack=stack)
        return
    print_findings(warnings)
    out.print(f"[green]stack {stack}: valid[/] ({summary})", highlight=False)


def _fail(findings: list[Finding], format: Format, headline: str, stack: str) -> NoReturn:
    if format is Format.text:
        print_findings([f for f in findings if f.severity != "error"])
        err.print(Text(headline, style="red"), highlight=False)
        print_findings([f for f in findings if f.severity == "error"])
    else:
        report(findings, format, headline, stack=stack)
    raise typer.Exit(CONFIG_ERROR_EXIT)


def _validate_manifests(stack: str, stacks_dir: Path, crd_dirs: list[Path]) -> tuple[int, list[Finding]]:
    """How many manifests the plan holds, and each way one breaks its schema (a finding about that object)."""
    try:
        from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
    except ImportError as exc:
        err.print(f"--crds needs the manifest validators ({exc.name} is missing): "
                  "pip install -e '.[manifests]' (or make setup-extras)", highlight=False, markup=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    from scripts.offline.plan import run_plan
    from scripts.offline.plan_model import known

    registry = SchemaRegistry.from_crd_dirs(crd_dirs)
    plan, _ = run_plan(stack, stacks_dir)
    problems = [Finding(rule="manifest", severity="error", resource=f"{p.kind}/{p.name}",
                        message=f"{p.path or '<document>'}: {p.message}",
                        fix="make the component that renders it match the schema, or update the CRDs")
                for doc in plan.manifests() for p in validate_manifest(known(doc), registry)]
    return len(plan.manifests()), problems


@app.command()
def plan(
    stack: StackOpt,
    out_dir: Annotated[Path | None, typer.Option("--out", help="default: build/<stack>")] = None,
    stacks_dir: StacksDirOpt = STACKS_DIR,
) -> None:
    """What `pulumi up` would create, offline: DIR/plan.json and DIR/manifests/."""
    from scripts.offline.plan import run_plan, write_plan  # imports Pulumi: keep `validate` and `diff` fast

    target = out_dir or Path("build") / stack
    if target.exists() and not target.is_dir():
        err.print(f"[red]error:[/] --out {escape(str(target))} is a file; give a directory (it is created if "
                  "missing)", highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT)
    _check_writable(target)  # before the plan's seconds, not after
    try:
        result, warnings = run_plan(stack, stacks_dir)
        print_findings(warnings)
        write_plan(result, target)
    except ConfigError as exc:
        raise fail_config(exc) from None
    except KeyboardInterrupt:
        left = (f"the previous plan in {target} is unchanged" if (target / "plan.json").exists()
                else f"no plan in {target}")
        err.print(f"interrupted: {left} (write_plan replaces a plan whole or not at all)", markup=False,
                  highlight=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    out.print(resource_tree(result))
    out.print(f"wrote {target / 'plan.json'} ({plural(len(result.resources), 'resource')}) and "
              f"{target / 'manifests'}/ ({plural(len(result.manifests()), 'Kubernetes object')})", highlight=False)


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="plan directory or plan.json (before)", exists=True)],
    new: Annotated[Path, typer.Argument(help="plan directory or plan.json (after)", exists=True)],
    format: Annotated[DiffFormat, typer.Option(help="markdown for PR comments")] = DiffFormat.text,
    exit_code: Annotated[bool, typer.Option("--exit-code", help="exit 1 when there are changes")] = False,
    title: Annotated[str, typer.Option(help="heading of the markdown report")] = "Offline plan diff",
    across_stacks: Annotated[bool, typer.Option(
        "--across-stacks", help="two stacks' plans (dev against prod): pair resources whatever stack and cluster "
        "names they carry, and show what the configs make differ")] = False,
) -> None:
    """Added, removed and changed resources between two plans, property by property."""
    try:
        before, after = Plan.load(old), Plan.load(new)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        err.print(f"[red]cannot read plan: {escape(str(exc))}[/] (make one with `slurm-eks plan --stack S --out DIR`)")
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    if before.stack != after.stack and not across_stacks:
        err.print(f"the plans are of two stacks ({before.stack}, {after.stack}): every resource would show as "
                  "removed and added; give --across-stacks to compare them resource by resource", markup=False,
                  highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT)
    if across_stacks:
        before, after = across(before), across(after)
    from scripts.change.change_gate import plan_config_changes
    from scripts.change.render import changes_json
    from scripts.change.render import render_markdown as render_changes_markdown
    from scripts.change.render import render_text as render_changes_text
    from scripts.change.replacements import offline_replacements

    result = diff_plans(before, after)
    replaced = offline_replacements(result)
    configs = None if across_stacks else plan_config_changes(before, after)
    if format is DiffFormat.json:
        report = diff_json(result, replaced)
        cost = None if result.empty else plan_cost_change_json(before, after, PriceTable.load())
        if cost is not None:
            report["cost"] = cost
        if configs is not None:
            report["config"] = changes_json(configs, str(old))
        typer.echo(json.dumps(report, indent=2, default=str))
        if exit_code and not result.empty:
            raise typer.Exit(1)
        return
    markdown = format is DiffFormat.markdown
    text = render_markdown(result, title, replaced) if markdown else render_text(result, replaced)
    if configs:  # two plans with records, and the configs differ
        text += (render_changes_markdown if markdown else render_changes_text)(configs, f"the stack config of {old}")
    text += plan_cost_change(before, after, PriceTable.load(), markdown=markdown, diff_empty=result.empty)
    typer.echo(text, nl=False)
    if exit_code and not result.empty:
        raise typer.Exit(1)


def _check_writable(directory: Path) -> None:
    """Exit 2 with one line when plans cannot be written into `directory`; creates nothing (a bad config must
    leave no directory behind), it looks at the nearest part of the path that exists."""
    existing = next(p for p in (directory, *directory.parents) if p.exists() or p == p.parent)
    problem = (os.strerror(errno.ENOTDIR) if not existing.is_dir()
               else os.strerror(errno.EACCES) if not os.access(existing, os.W_OK | os.X_OK) else None)
    if problem:
        err.print(f"error: --out {directory}: cannot write a plan there ({problem}); give a directory you can "
                  "write, such as build/<stack> (the default)", markup=False, highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT)


def resource_tree(plan: Plan) -> Tree:
    """Components as branches, with how many resources of each type they hold."""
    children: dict[str | None, list] = defaultdict(list)
    urns = {r.urn for r in plan.resources}
    for r in plan.resources:
        children[r.parent if r.parent in urns else None].append(r)

    def total(urn: str) -> int:
        return sum(1 + total(c.urn) for c in children[urn])

    def grow(branch: Tree, parent: str | None) -> None:
        kids = children[parent]
        for c in sorted((k for k in kids if not k.custom), key=lambda k: k.name):
            inside = f"({total(c.urn)})" if children[c.urn] else "(remote: built at deploy)"
            grow(branch.add(f"[bold]{c.name}[/] [dim]{c.type}[/] {inside}"), c.urn)
        for type_, n in sorted(Counter(k.type for k in kids if k.custom).items()):
            branch.add(f"{n} x {type_}")

    root = Tree(f"[bold]{plan.project}-{plan.stack}[/] ({plural(len(plan.resources), 'resource')})")
    grow(root, None)
    return root
