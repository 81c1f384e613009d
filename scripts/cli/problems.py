"""How every command shows findings (components/findings.py): the one text, markdown and JSON rendering
(components/findings_render.py), `--format` to choose, and a bad stack config's exit status 2."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from components.config.problems import ConfigError
from components.findings import Finding
from components.findings_render import render_json, render_markdown, render_text
from scripts.cli.exits import CONFIG_ERROR_EXIT, INTERRUPTED_EXIT  # noqa: F401 (the commands import them from here)

if TYPE_CHECKING:
    from scripts.offline.plan_model import Plan

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)
STYLE = {"error": "red", "warning": "yellow", "info": "green"}


class Format(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


FormatOpt = Annotated[Format, typer.Option(
    help="text for people, markdown for pull requests and CI step summaries, json for tools")]


def coloured(findings: Iterable[Finding]) -> Text:
    """The text rendering with each severity coloured (plain where the output is not a terminal)."""
    text = Text(render_text(findings).rstrip("\n"))
    for severity, style in STYLE.items():
        text.highlight_regex(rf"(?m)^{severity}(?=\[)", style)
    return text


def print_findings(findings: list[Finding], console: Console = err) -> None:
    if findings:
        console.print(coloured(findings), highlight=False)


def report(findings: list[Finding], format: Format, summary: str, **fields: Any) -> None:
    """A command's findings and its summary line on stdout, as `format` says (JSON: `summary` and `fields` are
    keys beside `findings` and `counts`)."""
    if format is Format.json:
        typer.echo(render_json(findings, summary=summary, **fields), nl=False)
    elif format is Format.markdown:
        typer.echo(render_markdown(findings) + ("\n" if findings else "") + summary)
    else:
        print_findings(findings, out)
        typer.echo(summary)


def fail_config(exc: ConfigError, format: Format = Format.text) -> typer.Exit:
    """Every finding of a stack config that must not be deployed (text: on stderr), then exit status 2."""
    if format is Format.text:
        err.print(Text(exc.headline, style="red"), highlight=False)
        print_findings(exc.findings)
    else:
        report(exc.findings, format, exc.headline, source=exc.source)
    return typer.Exit(CONFIG_ERROR_EXIT)


PlanDirOpt = Annotated[Path | None, typer.Option(
    "--plan", exists=True, help="check this plan (`slurm-eks plan --out DIR`) instead of planning the stack")]


def load_plan_of(stack: str, plan_dir: Path) -> Plan:
    """The plan in `plan_dir`, which must be a plan of `stack` (exit 2 with one line otherwise)."""
    from scripts.offline.plan_model import Plan

    try:
        plan = Plan.load(plan_dir)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        err.print(f"error: --plan {plan_dir}: cannot read a plan there ({exc}); make one with `slurm-eks plan "
                  f"--stack {stack} --out {plan_dir}`", markup=False, highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT) from None
    if plan.stack != stack:
        err.print(f"error: --plan {plan_dir} is a plan of stack {plan.stack}, not {stack}: give --stack "
                  f"{plan.stack}, or a plan of {stack} (`slurm-eks plan --stack {stack} --out DIR`)",
                  markup=False, highlight=False)
        raise typer.Exit(CONFIG_ERROR_EXIT)
    return plan
