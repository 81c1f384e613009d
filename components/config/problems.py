"""What is wrong with a stack config: one `Problem` per finding, all of them raised together."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning"]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`did you mean 'x'? ` for the closest known name, or "" when none is close (difflib, cutoff 0.6)."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def plural(count: int, noun: str) -> str:
    """A count as people read it: "1 error", "2 errors"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class Problem:
    rule: str  # the validator that found it, e.g. "fsx-capacity"
    severity: Severity
    path: str  # config path under `slurm-eks:cluster`, e.g. "storage.fsx.capacityGiB"
    value: Any
    message: str  # what is wrong
    fix: str  # how to put it right

    def render(self) -> str:
        return (
            f"{self.severity}[{self.rule}] {self.path or '<root>'}: {self.message}\n"
            f"    value: {self.value!r}\n"
            f"    fix:   {self.fix}"
        )


class ConfigError(Exception):
    """A stack config that must not be deployed; carries every problem found, not just the first."""

    def __init__(self, problems: Iterable[Problem], source: str = "") -> None:
        self.problems = list(problems)
        self.source = source
        super().__init__(self.render())

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def render(self) -> str:
        head = f"{self.source}: " if self.source else ""
        lines = [f"{head}{plural(len(self.errors), 'error')} in slurm-eks:cluster"]
        lines += [p.render() for p in self.problems]
        return "\n".join(lines)
