"""How every command shows a stack config's problems: one block per problem, then exit status 2."""

from __future__ import annotations

import typer
from rich.console import Console

from components.config.problems import ConfigError, Problem, plural

CONFIG_ERROR_EXIT = 2
err = Console(stderr=True, soft_wrap=True)


def print_problems(problems: list[Problem]) -> None:
    for p in problems:
        colour = "red" if p.severity == "error" else "yellow"
        err.print(f"[{colour}]{p.severity}[/]\\[{p.rule}] [bold]{p.path or '<root>'}[/]: {p.message}",
                  highlight=False)
        err.print(f"    value: {p.value!r}", highlight=False, markup=False)
        err.print(f"    fix:   {p.fix}", highlight=False, markup=False)


def fail_config(exc: ConfigError) -> typer.Exit:
    err.print(f"[red]{exc.source}: {plural(len(exc.errors), 'error')} in slurm-eks:cluster[/]", highlight=False)
    print_problems(exc.problems)
    return typer.Exit(CONFIG_ERROR_EXIT)
