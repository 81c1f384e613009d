"""What a deploy check reports: one finding per broken flow, permission or ordering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    rule: str  # the named rule, e.g. "network", "iam", "order"
    resource: str  # what it is about: a resource label (`name (type)`), a flow or a role
    message: str  # what is wrong, in the reader's terms (who cannot reach whom, who may not do what)
    fix: str  # what to change
    severity: Severity = "error"

    def render(self) -> str:
        return f"{self.severity}[{self.rule}] {self.resource}\n    {self.message}\n    fix: {self.fix}"


def resource_label(urn: str) -> str:
    """`name (type)` from a URN: `urn:pulumi:stack::project::parent$type::name`."""
    qualified, _, name = urn.rpartition("::")
    return f"{name} ({qualified.rpartition('$')[2]})"
