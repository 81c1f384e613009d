"""Plans of variant stacks and lookups of the Kubernetes objects in a plan."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from components.config.cluster import ClusterConfig
from components.config.validation import parse_cluster_config
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan, PlannedResource
from tests.config.helpers import raw_config

RELEASE = "kubernetes:helm.sh/v3:Release"


def objects(plan: Plan, kind: str) -> dict[str, dict[str, Any]]:
    """Manifests of one kind by metadata.name."""
    return {doc["metadata"]["name"]: doc for doc in plan.manifests() if doc["kind"] == kind}


def resource(plan: Plan, kind: str, name: str) -> PlannedResource:
    """The planned resource of the Kubernetes object `kind`/`name`."""
    (found,) = [r for r in plan.resources if r.is_manifest and r.inputs["kind"] == kind
                and r.inputs["metadata"]["name"] == name]
    return found


def releases(plan: Plan) -> dict[str, Any]:
    return {r.inputs["name"]: r for r in plan.of_type(RELEASE)}


def variant(stack: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    raw = raw_config(stack)
    change(raw)
    return raw


def plan_of(raw: dict[str, Any], tmp_path: Path, name: str = "variant") -> Plan:
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    plan, _ = run_plan(name, tmp_path)
    return plan


def config_of(raw: dict[str, Any]) -> ClusterConfig:
    config, _ = parse_cluster_config(raw, "test")
    return config


def trainium_only(raw: dict[str, Any]) -> None:
    """The prod stack's Trainium partition alone: no GPUs (nor the pools, nor the notebooks on them), so no GPU
    limits for the QoS either."""
    raw["partitions"] = {"trainium": {**raw["partitions"]["trainium"], "default": True}}
    raw.pop("kubernetesPools", None)
    raw.get("addons", {}).pop("jupyterhub", None)
    for qos in raw["slurm"].get("qos", {}).values():
        for limits in ("grpTRES", "maxTRESPerUser", "maxTRESPerJob"):
            qos.pop(limits, None)


def from_directory(**ldap: Any) -> Callable[[dict[str, Any]], None]:
    """People from an LDAP server (`slurm.identity.ldap` with `ldap`'s keys) instead of the stack's."""
    def change(raw: dict[str, Any]) -> None:
        raw["slurm"].pop("accounts", None)
        raw["slurm"]["identity"] = {"ldap": {"uri": "ldaps://ldap.example.org", "baseDN": "dc=example,dc=org",
                                             **ldap}}
    return change
