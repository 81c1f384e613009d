"""What is wrong with a stack config: every finding (components/findings.py) raised together, and the helpers
its messages share."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from components.findings import Finding, errors
from components.findings_render import render_text


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`did you mean 'x'? ` for the closest known name, or "" when none is close (difflib, cutoff 0.6)."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def plural(count: int, noun: str) -> str:
    """A count as people read it: "1 error", "2 errors"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


class ConfigError(Exception):
    """A stack config that must not be deployed; carries every finding, not just the first (and the warnings)."""

    def __init__(self, findings: Iterable[Finding], source: str = "") -> None:
        self.findings = list(findings)
        self.source = source
        super().__init__(self.render())

    @property
    def errors(self) -> list[Finding]:
        return errors(self.findings)

    @property
    def headline(self) -> str:
        head = f"{self.source}: " if self.source else ""
        return f"{head}{plural(len(self.errors), 'error')} in slurm-eks:cluster"

    def render(self) -> str:
        return f"{self.headline}\n{render_text(self.findings)}".rstrip("\n")
