"""The drain reason every slurm-eks check writes: `slurm-eks: <check>: <detail>`.

node-check.sh writes it in bash (`drain` there); the repair controller and the active checks read and write
it here. A reason without the prefix was written by a person (or by Slurm itself) and is never acted on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "slurm-eks:"
# Check names are short kebab-case words (gpu-count, xid, ecc, dcgm, efa, neuron, shared, disk, nccl, ...).
_REASON = re.compile(r"^slurm-eks: (?P<check>[a-z0-9][a-z0-9-]*): (?P<detail>.+)$", re.DOTALL)
# Slurm truncates nothing we write, but scontrol refuses nothing either: keep reasons one readable line.
MAX_DETAIL = 200


@dataclass(frozen=True)
class CheckReason:
    check: str
    detail: str


def drain_reason(check: str, detail: str) -> str:
    """The reason text for `scontrol update ... state=drain reason=...`."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", check):
        raise ValueError(f"check name {check!r} is not kebab-case")
    one_line = " ".join(detail.split())[:MAX_DETAIL]
    return f"{PREFIX} {check}: {one_line}"


def parse_reason(reason: str | None) -> CheckReason | None:
    """The check and detail of a reason a slurm-eks check wrote; None for anything else (a person's reason)."""
    match = _REASON.match(reason or "")
    return CheckReason(match["check"], match["detail"]) if match else None
