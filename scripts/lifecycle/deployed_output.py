"""The deployed record of a stack, read where `up` left it: its stack output, through `pulumi stack output`, or a
file given with `--deployed` (scripts/change/deployed.py reads both shapes)."""

from __future__ import annotations

import json
from pathlib import Path

from components.config.deployed_record import OUTPUT
from scripts.change import deployed as deployed_io
from scripts.change.change_gate import ChangeGateError
from scripts.lifecycle import pulumi_cli


def online_record(stack: str) -> deployed_io.Deployed | None:
    """The stack's record through `pulumi stack output`; None for a stack deployed before records, or never."""
    status, out, err = pulumi_cli.capture(pulumi_cli.stack_output_command(stack, OUTPUT))
    if status != 0:
        if "does not have output property" in err or "no stack named" in err:
            return None
        raise ChangeGateError(f"`pulumi stack output {OUTPUT}` for stack {stack} failed: {err.strip()}; log in to "
                              "the state backend, or give the record with --deployed FILE")
    try:
        return deployed_io.parse(json.loads(out), f"stack {stack}'s output {OUTPUT}")
    except ValueError as exc:
        raise ChangeGateError(str(exc)) from None


def load_record(stack: str, deployed: Path | None) -> deployed_io.Deployed | None:
    if deployed is not None:
        try:
            return deployed_io.load(deployed)
        except deployed_io.DeployedUnreadable as exc:
            raise ChangeGateError(str(exc)) from None
    return online_record(stack)
