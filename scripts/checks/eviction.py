"""The deploy check's *eviction* rule: slurmd pods are Guaranteed, so memory pressure on a node never
evicts the daemon that runs the jobs (the kubelet evicts BestEffort and Burstable pods above their
requests first: kubernetes.io/docs/concepts/scheduling-eviction/node-pressure-eviction).

The pod is the NodeSet's, as Slinky's operator renders it (v1.2.1 internal/builder/workerbuilder/
worker_app.go: the `slurmd` container from `spec.slurmd`, the restartable `logfile` sidecar from
`spec.logfile`, the rest, init containers included, from `spec.template.spec`).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from components.findings import Finding, resource_label
from scripts.offline.plan_model import Plan

MIB = 1024 * 1024
_SUFFIXES = {"": 1, "m": Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
             "Ki": 1024, "Mi": MIB, "Gi": 1024 * MIB, "Ti": 1024 * 1024 * MIB}


def quantity(value: str) -> Decimal:
    """A Kubernetes resource quantity (the forms these manifests use) as a number of units."""
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(value))
    if match is None or match.group(2) not in _SUFFIXES:
        raise ValueError(f"not a resource quantity: {value!r}")
    return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]


def slinky_pod(nodeset: dict[str, Any]) -> dict[str, Any]:
    """The NodeSet's pod spec as the operator renders it (only what QoS and scheduling read)."""
    spec = nodeset["spec"]
    logfile = {"name": "logfile", "restartPolicy": "Always", **spec.get("logfile", {})}
    template = spec.get("template", {}).get("spec", {})
    return {**template, "containers": [{"name": "slurmd", **spec.get("slurmd", {})}],
            "initContainers": [logfile, *({**c} for c in template.get("initContainers", []))]}


def qos_class(pod: dict[str, Any]) -> str:
    """kubernetes/kubernetes pkg/apis/core/helper/qos/qos.go ComputePodQOS, for pods without pod-level
    resources: every container, init ones included, counts; only cpu and memory decide."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        resources = container.get("resources", {})
        found = set()
        for kind, totals in (("requests", requests), ("limits", limits)):
            for name, value in resources.get(kind, {}).items():
                if name in ("cpu", "memory") and quantity(value) > 0:
                    totals[name] = totals.get(name, Decimal(0)) + quantity(value)
                    if kind == "limits":
                        found.add(name)
        guaranteed = guaranteed and found == {"cpu", "memory"}
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def check(plan: Plan) -> list[Finding]:
    found = []
    for r in plan.resources:
        if r.is_manifest and r.inputs.get("kind") == "NodeSet":
            qos = qos_class(slinky_pod(r.inputs))
            if qos != "Guaranteed":
                found.append(Finding(
                    rule="eviction", severity="error", resource=resource_label(r.urn), urn=r.urn,
                    message=f"its slurmd pods are {qos}: under memory pressure the kubelet evicts them first, and the "
                    "jobs on the node die with them",
                    fix="give every container (slurmd, logfile) cpu and memory requests equal to their limits"))
    return found
