"""What is deployed: the record `pulumi up` leaves (components/config/deployed_record.py), read back:
`pulumi stack output deployedConfig --json` online (pulumi.com/docs/iac/cli/commands/pulumi_stack_output), or a
file offline (`--deployed FILE`: that JSON, a `pulumi stack output --json` of every output, or a plan directory or
plan.json, whose outputs carry the record too)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.config.deployed_record import FORMAT, OUTPUT


class DeployedUnreadable(ValueError):
    """A record that is not one."""


@dataclass(frozen=True)
class Deployed:
    stack: str
    config: dict[str, Any]
    plan_digest: str | None
    source: str  # where it was read from, for messages


def plan_digest(plan_json: str) -> str:
    return hashlib.sha256(plan_json.encode()).hexdigest()


def parse(document: Any, source: str) -> Deployed:
    """A record from any of the shapes `--deployed` accepts."""
    if isinstance(document, dict) and "resources" in document and "outputs" in document:
        document = document["outputs"].get(OUTPUT)  # a plan.json
    elif isinstance(document, dict) and OUTPUT in document:
        document = document[OUTPUT]  # `pulumi stack output --json`
    if not isinstance(document, dict) or document.get("format") != FORMAT or not isinstance(
            document.get("config"), dict):
        raise DeployedUnreadable(f"{source}: no `{OUTPUT}` record (format {FORMAT}) in it; give the JSON of "
                                 f"`pulumi stack output {OUTPUT} --json`, or a plan made by `slurm-eks plan`")
    return Deployed(str(document.get("stack", "")), document["config"], document.get("planDigest"), source)


def load(path: Path) -> Deployed:
    target = path / "plan.json" if path.is_dir() else path
    try:
        document = json.loads(target.read_text())
    except (OSError, ValueError) as exc:
        raise DeployedUnreadable(f"{target}: cannot read it as JSON ({exc})") from None
    return parse(document, str(target))
