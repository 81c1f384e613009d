"""Slurm's nodes as the repair controller sees them, parsed from either JSON shape it meets.

- Slurm 22.05 `sinfo --json` (openapi/v0.0.38; captures in tests/health/data/sinfo-*-22.05.json): `state` is one
  lower-case string and `state_flags` a list; `features` a comma-separated string; `reason_changed_at` an int.
- data_parser v0.0.44 (Slurm 25.11 `scontrol show nodes --json` and slurmrestd GET /slurm/v0.0.44/nodes/):
  schema `v0.0.44_node` in the OpenAPI description slurmrestd 25.11 generates (`slurmrestd
  --generate-openapi-spec -d v0.0.44`; the tests generate it, tests/slurm_openapi.py): `state` is a list
  of upper-case words (base state and flags), `features` / `partitions` are `v0.0.44_csv_string` (lists),
  `reason_changed_at` a `v0.0.44_uint64_no_val_struct` {set, infinite, number}.

Standard library only: this runs in the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slurm.agent.health.reasons import CheckReason, parse_reason

# SchedMD/slurm slurm-25-11-6-1 src/common/slurm_protocol_defs.h: IS_NODE_DRAINING is DRAIN && (ALLOCATED ||
# MIXED); IS_NODE_DRAINED is DRAIN && !DRAINING. COMPLETING is added: a job's epilog still runs there.
_BUSY = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


@dataclass(frozen=True)
class SlurmNode:
    name: str
    states: frozenset[str]  # upper-case base state and flags, e.g. {"IDLE", "DRAIN"}
    alloc_cpus: int
    reason: str = ""
    reason_user: str = ""
    reason_time: int | None = None  # Unix time the reason was set
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()

    @property
    def drain(self) -> bool:
        """The DRAIN flag is set (drained or still draining)."""
        return "DRAIN" in self.states

    @property
    def draining(self) -> bool:
        """DRAIN set but jobs still hold the node: wait for them to requeue or end."""
        return self.drain and (bool(self.states & _BUSY) or self.alloc_cpus > 0)

    @property
    def drained(self) -> bool:
        """DRAIN set and nothing allocated: safe to replace."""
        return self.drain and not self.draining

    @property
    def check(self) -> CheckReason | None:
        """The slurm-eks check that drained it; None for a person's (or Slurm's own) reason."""
        return parse_reason(self.reason)

    @property
    def partition(self) -> str:
        """Slinky names a NodeSet's partition after it and lists it first; "" for a node in none."""
        return self.partitions[0] if self.partitions else ""


def _csv(value: Any) -> tuple[str, ...]:
    """v0.0.38 writes lists as "a,b" strings, v0.0.44 as lists (v0.0.44_csv_string)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(str(item).strip() for item in items if str(item).strip())


def _time(value: Any) -> int | None:
    """v0.0.38: a plain int (0 = unset); v0.0.44: a {set, infinite, number} no_val struct."""
    if isinstance(value, Mapping):
        if not value.get("set") or value.get("infinite"):
            return None
        return int(value["number"])
    return (value or None) if isinstance(value, int) else None


def parse_node(raw: Mapping[str, Any]) -> SlurmNode:
    state = raw.get("state")
    if isinstance(state, list):  # v0.0.44: base state and flags in one list
        states = frozenset(str(s).upper() for s in state)
    else:  # v0.0.38: "idle" plus state_flags ["DRAIN"]
        states = frozenset({str(state or "UNKNOWN").upper(), *(str(f).upper() for f in raw.get("state_flags") or [])})
    return SlurmNode(
        name=str(raw["name"]),
        states=states,
        reason=str(raw.get("reason") or ""),
        reason_user=str(raw.get("reason_set_by_user") or ""),
        reason_time=_time(raw.get("reason_changed_at")),
        partitions=_csv(raw.get("partitions")),
        features=_csv(raw.get("features")),
        alloc_cpus=int(raw.get("alloc_cpus") or 0),
    )


def parse_nodes(document: Mapping[str, Any]) -> list[SlurmNode]:
    """The `nodes` list of a 22.05 `sinfo --json` or a v0.0.44 nodes reply (the shape is told per node)."""
    return [parse_node(raw) for raw in document.get("nodes") or []]
