"""Gitops mode's one switch: once `hand_over_to` names a stand-in, every Helm chart the program would install is
left to Argo CD, and whatever depended on the chart's Release depends on `stand_in` (the root Application)
instead. Everything else (AWS, Namespaces, NetworkPolicies, Secrets, the plain manifests) stays with Pulumi.
The tree Argo CD syncs is `slurm-eks gitops export` of the same stack (docs/gitops.md)."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

_STAND_IN: ContextVar[pulumi.Resource | None] = ContextVar("gitops_stand_in", default=None)


def hand_over_to(stand_in: pulumi.Resource | None) -> None:
    """From here on, charts go to Argo CD when `stand_in` is set; with None, Pulumi installs them. The program
    sets it once per run (components/program.py), so a plan without `gitops:` in the same process resets it."""
    _STAND_IN.set(stand_in)


def helm_release(resource_name: str, **kwargs: Any) -> pulumi.Resource:
    """`k8s.helm.v3.Release(resource_name, **kwargs)`, or in gitops mode the stand-in Argo CD installs it by."""
    stand_in = _STAND_IN.get()
    return stand_in if stand_in is not None else k8s.helm.v3.Release(resource_name, **kwargs)
