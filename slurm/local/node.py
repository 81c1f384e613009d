"""The local node's state as slurmctld reports it, and waiting for it to take jobs."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from slurm.local.errors import LocalSlurmError

READY_TIMEOUT_S = 60.0
# Flags that mean the node will not run jobs until someone intervenes.
BROKEN_FLAGS = ("DRAIN", "INVAL", "FAIL")
USABLE = ("IDLE", "MIXED", "ALLOCATED", "COMPLETING")


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str
    reason: str | None

    @property
    def usable(self) -> bool:
        base, *flags = self.state.rstrip("*").split("+")
        return base in USABLE and not any(flag in BROKEN_FLAGS for flag in flags) and "*" not in self.state

    @property
    def broken(self) -> bool:
        return any(flag in self.state for flag in BROKEN_FLAGS)


def parse_show_node(line: str) -> NodeState:
    """`scontrol show node NAME -o`: Reason= runs to the end of the line (it may hold spaces)."""
    head, _, reason = line.partition(" Reason=")
    fields = dict(item.split("=", 1) for item in head.split() if "=" in item)
    return NodeState(name=fields.get("NodeName", "?"), state=fields.get("State", "UNKNOWN"), reason=reason or None)


def node_state(name: str) -> NodeState | None:
    result = subprocess.run(["scontrol", "show", "node", name, "-o"], capture_output=True, text=True, timeout=15)
    if result.returncode != 0 or not result.stdout.strip():
        return None
    return parse_show_node(result.stdout.strip())


def wait_until_usable(name: str, logs: str, timeout_s: float = READY_TIMEOUT_S) -> NodeState:
    deadline = time.monotonic() + timeout_s
    state = None
    while time.monotonic() < deadline:
        state = node_state(name)
        if state is not None and state.usable:
            return state
        if state is not None and state.broken:
            raise LocalSlurmError(
                f"node {name} is {state.state} (reason: {state.reason}); see {logs}. If the cause is gone, "
                f"`scontrol update nodename={name} state=resume` brings it back."
            )
        time.sleep(0.5)
    seen = state.state if state else "unknown to slurmctld"
    raise LocalSlurmError(f"node {name} did not become idle within {timeout_s:.0f} s (state {seen}); see {logs}")
