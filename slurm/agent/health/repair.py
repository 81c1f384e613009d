"""What to do about each drained node: a pure function of Slurm's nodes, the replacement history and the time.

replace: a slurm-eks check drained it and its jobs are gone; within the partition's hourly bound.
wait:    a slurm-eks check drained it but jobs still run there (they requeue or end first).
hold:    would replace, but the partition reached max_per_hour in the last hour, or the node was replaced
         moments ago (its new instance may still be registering).
ignore:  not drained, or drained by a person (a reason without the slurm-eks prefix): never touched.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from slurm.agent.health.ledger import Entry
from slurm.agent.health.nodes import SlurmNode

Kind = Literal["replace", "wait", "hold", "ignore"]


# The bound counts replacements in any rolling hour; a node in the ledger this recently is not replaced again.
WINDOW_SECONDS = 3600.0
RECENT_SECONDS = 1800.0


@dataclass(frozen=True)
class Policy:
    max_per_hour: int  # replacements per partition in any rolling hour (health.repair.maxReplacementsPerHour)
    window_seconds: float = WINDOW_SECONDS
    recent_seconds: float = RECENT_SECONDS


@dataclass(frozen=True)
class Decision:
    kind: Kind
    node: str
    partition: str
    check: str  # the slurm-eks check that drained it; "" when none did
    why: str  # a short word for logs and the held counter's `why` label


def decide(nodes: Sequence[SlurmNode], history: Iterable[Entry], now: float, policy: Policy) -> list[Decision]:
    history = list(history)
    replaced_in_window = Counter(e.partition for e in history if now - e.time < policy.window_seconds)
    recent = {e.node for e in history if now - e.time < policy.recent_seconds}

    decisions: list[Decision] = []
    # Longest drained first, so a bounded partition replaces its oldest failures first (no time: last).
    for node in sorted(nodes, key=lambda n: (math.inf if n.reason_time is None else n.reason_time, n.name)):
        check = node.check
        part = node.partition
        if not node.drain:
            decisions.append(Decision("ignore", node.name, part, "", "not-drained"))
        elif check is None:
            decisions.append(Decision("ignore", node.name, part, "", "person"))
        elif node.draining:
            decisions.append(Decision("wait", node.name, part, check.check, "jobs-running"))
        elif node.name in recent:
            decisions.append(Decision("hold", node.name, part, check.check, "replaced-recently"))
        elif replaced_in_window[part] >= policy.max_per_hour:
            decisions.append(Decision("hold", node.name, part, check.check, "rate-limit"))
        else:
            replaced_in_window[part] += 1
            decisions.append(Decision("replace", node.name, part, check.check, "drained"))
    return decisions
