"""The deploy check's eviction rule: slurmd pods of the shipped stacks are Guaranteed; the first version's
device-only requests (BestEffort) and an unsized sidecar (Burstable) are named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from scripts.checks import eviction
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import shipped_plan


def broken(change: Callable[[dict[str, Any]], None]) -> Plan:
    plan = copy.deepcopy(shipped_plan("prod"))
    for r in plan.resources:
        if r.is_manifest and r.inputs["kind"] == "NodeSet":
            change(r.inputs["spec"])
    return plan


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_nodesets_are_guaranteed(stack: str) -> None:
    plan = shipped_plan(stack)
    assert [r for r in plan.resources if r.is_manifest and r.inputs["kind"] == "NodeSet"]
    assert eviction.check(plan) == []


def test_device_only_requests_are_best_effort() -> None:
    def devices_only(spec: dict[str, Any]) -> None:
        for kind in ("requests", "limits"):
            for name in ("cpu", "memory"):
                spec["slurmd"]["resources"][kind].pop(name)

    def first_version(spec: dict[str, Any]) -> None:  # devices only, and no sidecar or init container resources
        devices_only(spec)
        spec["logfile"].pop("resources")
        for init in spec["template"]["spec"].get("initContainers", []):
            init.pop("resources")

    found = eviction.check(broken(first_version))
    assert {f.resource for f in found} == {f"slurm-nodeset-{p} (kubernetes:slinky.slurm.net/v1beta1:NodeSet)"
                                           for p in ("gpu-a100", "gpu-h100", "trainium")}
    assert all("are BestEffort" in f.message for f in found)
    assert {"are Burstable" in f.message for f in eviction.check(broken(devices_only))} == {True}


def test_a_sidecar_without_limits_makes_the_pod_burstable() -> None:
    def unsized_sidecar(spec: dict[str, Any]) -> None:
        spec["logfile"]["resources"].pop("limits")

    def unsized_init(spec: dict[str, Any]) -> None:  # the identity init container (prod declares people)
        spec["template"]["spec"]["initContainers"][0]["resources"].pop("limits")

    assert {"Burstable" in f.message for f in eviction.check(broken(unsized_sidecar))} == {True}
    assert {"Burstable" in f.message for f in eviction.check(broken(unsized_init))} == {True}


def test_quantities() -> None:
    assert eviction.quantity("100m") == eviction.Decimal("0.1") and eviction.quantity("2Gi") == 2 * 1024**3
    with pytest.raises(ValueError, match="not a resource quantity"):
        eviction.quantity("2 GB")
