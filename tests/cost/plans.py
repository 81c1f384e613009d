"""Small plans for the cost tests: the resources and outputs the estimate reads, in the shapes the offline plan
records them (compare tests/plan/fixtures.py shipped_plan)."""

from __future__ import annotations

from typing import Any

from scripts.cost.price_table import PriceTable
from scripts.offline.plan_model import Plan, PlannedResource


def resource(type_: str, name: str, **inputs: Any) -> PlannedResource:
    return PlannedResource(f"urn:pulumi:s::slurm-eks::{type_}::{name}", type_, name, None, None, [], True, False,
                           False, dict(inputs))


def group(types: list[str], min_nodes: int, max_nodes: int, capacity: str = "on-demand") -> dict[str, Any]:
    return {"instanceTypes": types, "minNodes": min_nodes, "maxNodes": max_nodes, "capacityType": capacity}


def plan(region: str = "us-east-1", partitions: dict[str, Any] | None = None,
         resources: list[PlannedResource] | None = None) -> Plan:
    outputs = {"region": region, "nodeGroups": {"partitions": partitions or {}, "kubernetesPools": {}}}
    return Plan("s", "slurm-eks", resources or [], outputs)


def table(**regional: float) -> PriceTable:
    """A table with us-east-1 instance prices p5.48xlarge 55.04, p4d.24xlarge 21.957642 (Karpenter's) and the
    given regional items."""
    return PriceTable({
        "sources": {"k": {"where": "test", "date": "2026-07-06"}},
        "global": {"eksClusterHour": {"usd": 0.10, "source": "k"}},
        "regions": {"us-east-1": {
            "instances": {"p5.48xlarge": {"usd": 55.04, "source": "k"},
                          "p4d.24xlarge": {"usd": 21.957642, "source": "k"},
                          "m7i.large": {"usd": 0.1008, "source": "k"}},
            **{k.replace("__", ":"): {"usd": v, "source": "k"} for k, v in regional.items()}}},
    })
