"""The one shape every check reports in: stack-config validation (`slurm-eks validate`, `pulumi up`), the deploy
check (`slurm-eks check`), the policy pack (`slurm-eks policy`, `pulumi preview`), preflight, the accounts
document and the cost estimate's gaps. How findings read (text, markdown, JSON) is components/findings_render.py.

Standard library only and free of Pulumi: the policy pack, the tools and the config validation all import it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

Severity = Literal["error", "warning", "info"]
"""error: must be fixed (validate exits 2, check and preflight exit 1; a mandatory policy); warning: should be
looked at, nothing stops (an advisory policy, a lower-bound cost); info: what a check saw, nothing wrong (a
preflight check that passed)."""
SEVERITIES: tuple[Severity, ...] = get_args(Severity)


@dataclass(frozen=True, kw_only=True)
class Finding:
    """What one rule found. It is about a setting (`path`) or about a thing (`resource`), never both; neither for
    what concerns the whole config or the whole plan."""

    rule: str  # the named rule that found it, e.g. "fsx-capacity", "network", "no-world-ssh", "vcpu-quota"
    severity: Severity
    message: str  # what is wrong (or, for info, what was seen), in the reader's terms
    fix: str = ""  # how to put it right; empty where there is nothing to do
    path: str = ""  # a setting: its path under `slurm-eks:cluster` ("storage.fsx.capacityGiB") or a stack-file key
    resource: str = ""  # a thing: a planned resource as `name (type)`, a flow, a role, an AWS quota or bucket
    urn: str = ""  # the planned resource's Pulumi URN, where the finding is about exactly one
    value: Any = None  # the setting's value as written, where there is one

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r}: one of {', '.join(SEVERITIES)}")
        if self.path and self.resource:
            raise ValueError(f"a finding is about a setting or a resource, not both: {self.path!r}, {self.resource!r}")

    @property
    def where(self) -> str:
        """What it is about, as people read it: the setting's path or the resource; "" for the whole."""
        return self.path or self.resource


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


def resource_label(urn: str) -> str:
    """`name (type)` from a URN: `urn:pulumi:stack::project::parent$type::name` (or `...::type::name` at the top)."""
    parts = urn.split("::", 3)
    if len(parts) < 4:
        return urn
    return f"{parts[3]} ({parts[2].rpartition('$')[2]})"
