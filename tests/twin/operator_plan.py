"""The Slinky objects of a shipped stack's offline plan, as the operator port (scripts/twin/operator) takes them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from scripts.twin.operator import slurmconf, worker
from scripts.twin.operator.model import PodPlan
from tests.plan.fixtures import shipped_plan

NAMESPACE = "slurm"


@dataclass(frozen=True)
class SlinkyObjects:
    manifests: tuple[dict[str, Any], ...]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m.get("kind") == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [m for m in self.of_kind(kind) if name is None or m["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {[m['metadata']['name'] for m in found]}"
        return found[0]

    @property
    def controller(self) -> dict[str, Any]:
        return self.one("Controller")

    @property
    def accounting(self) -> dict[str, Any]:
        return self.one("Accounting")

    @property
    def nodesets(self) -> list[dict[str, Any]]:
        return self.of_kind("NodeSet")

    def nodeset(self, name: str) -> dict[str, Any]:
        return self.one("NodeSet", name)

    @property
    def configmaps(self) -> dict[str, dict[str, Any]]:
        return {m["metadata"]["name"]: m for m in self.of_kind("ConfigMap")
                if m["metadata"].get("namespace") == NAMESPACE}


@cache
def slinky(stack: str) -> SlinkyObjects:
    return SlinkyObjects(tuple(shipped_plan(stack).manifests()))


def nodeset_pods(stack: str, edit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, PodPlan]:
    """Partition -> its first NodeSet pod as the operator builds it, after `edit(nodeset)` (on a copy) if given."""
    objects = slinky(stack)
    nodesets = [copy.deepcopy(n) for n in objects.nodesets]
    for nodeset in nodesets:
        if edit is not None:
            edit(nodeset)
    return {n["metadata"]["name"]: worker.nodeset_pod(n, objects.controller, 0)
            for n in slurmconf.nodesets_for_controller(objects.controller, nodesets)}
