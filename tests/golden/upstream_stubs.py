"""Golden plans keep a digest of each object copied from an upstream manifest, not its body.

An object the plan applies exactly as a pinned upstream file has it (components/upstream.py PINNED: the MPI
Operator's CRD, ClusterRoles, ...) is written to tests/golden/ (plan.json and manifests/) as a stub: its identity
(apiVersion, kind, name, namespace), its source (URL, release) and the SHA-256 of its body as canonical JSON
(`json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`, UTF-8). A new release changes the
digest; an object the project changes (the MPI Operator's Deployment, its Namespace) no longer matches upstream
and is written in full, so the golden diff shows the change. `slurm-eks plan` itself writes every body: a person
reviewing a plan reads what would be applied.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from components import upstream
from scripts.offline.plan import write_plan
from scripts.offline.plan_model import Plan

Identity = tuple[str, str, str, str | None]


def canonical_sha256(body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def identity(body: dict[str, Any]) -> Identity:
    meta = body.get("metadata") or {}
    return body.get("apiVersion", ""), body.get("kind", ""), meta.get("name", ""), meta.get("namespace")


def upstream_objects(files: tuple[upstream.UpstreamFile, ...] = upstream.PINNED,
                     cache: Path | None = None) -> dict[str, tuple[upstream.UpstreamFile, Identity]]:
    """Every object of the pinned files the cache holds as pinned, by its canonical digest. A file not in the
    cache adds none: a plan that applies its objects could not have been made without it."""
    found = {}
    for file in files:
        try:
            raw = upstream.read(file, cache)
        except upstream.UpstreamError:
            continue
        for obj in yaml.safe_load_all(raw):
            if isinstance(obj, dict) and "kind" in obj:
                found[canonical_sha256(obj)] = (file, identity(obj))
    return found


def stub(body: dict[str, Any], file: upstream.UpstreamFile) -> dict[str, Any]:
    api_version, kind, name, namespace = identity(body)
    metadata = {"name": name} | ({"namespace": namespace} if namespace else {})
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata,
            "upstream": {"url": file.url, "version": file.version, "sha256": canonical_sha256(body)}}


def golden_plan(plan: Plan, cache: Path | None = None) -> Plan:
    """`plan` with the inputs of each resource that is a verbatim upstream object replaced by its stub."""
    copied = upstream_objects(cache=cache)
    resources = []
    for resource in plan.resources:
        source = copied.get(canonical_sha256(resource.inputs)) if resource.is_manifest else None
        if source is not None and source[1] == identity(resource.inputs):
            resource = dataclasses.replace(resource, inputs=stub(resource.inputs, source[0]))
        resources.append(resource)
    return dataclasses.replace(plan, resources=resources)


def write_golden(plan: Plan, out: Path) -> None:
    """What `make golden` writes and tests/plan/test_golden.py compares: write_plan of the golden plan."""
    write_plan(golden_plan(plan), out)
