"""Offline plans of the shipped stacks, made once per test session (a plan takes well under a second)."""

from __future__ import annotations

from functools import cache

from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan, PlannedResource


@cache
def shipped_plan(stack: str) -> Plan:
    plan, _ = run_plan(stack)
    return plan


def one(plan: Plan, type_: str, name: str | None = None) -> PlannedResource:
    found = [r for r in plan.of_type(type_) if name is None or r.name == name]
    assert len(found) == 1, f"expected one {type_} {name or ''}, found {[r.name for r in found]}"
    return found[0]
