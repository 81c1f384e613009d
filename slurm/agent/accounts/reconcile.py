"""Plan and apply, as both command lines run them (`python3 -m slurm.agent.accounts`, `slurm-eks accounts`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from slurm.agent.accounts import current, desired, sacctmgr
from slurm.agent.accounts.errors import AccountsError
from slurm.agent.accounts.plan import Change, plan, render


def plan_file(path: Path) -> str:
    """The plan for the document at `path` against the cluster's slurmdbd, as text."""
    wanted = desired.load(path)
    return render(plan(wanted, current.read(wanted.cluster)))


def apply_file(path: Path, say: Callable[[str], None]) -> int:
    """Apply the plan change by change (`say` hears each before it runs, then a summary); the number applied.
    Reads the state back afterwards: anything still different is an AccountsError, so a change sacctmgr
    accepted without making it fails the run instead of passing it."""
    wanted = desired.load(path)
    changes: list[Change] = plan(wanted, current.read(wanted.cluster))
    for change in changes:
        say(change.text)
        sacctmgr.change(change.args)
    left = plan(wanted, current.read(wanted.cluster))
    if left:
        raise AccountsError(f"after applying {len(changes)} change(s) the state still differs:\n{render(left)}")
    say(f"applied {len(changes)} change(s)" if changes else "No changes.")
    return len(changes)
