"""Secrets stay secret: stack files name a KMS secrets provider, no generated secret reaches any file of the
offline plan (plan.json, manifests/) except as a `[secret]` marker, and the storage/network config rules that
keep data safe fire on configs that break them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import FULL_KEY
from components.network import s3_endpoint_policy
from components.problems import ConfigError
from components.stack_secrets import secrets_provider_problems
from components.stackfile import STACKS_DIR, stack_file
from components.validation import parse_cluster_config
from scripts.offline.mocks import _digest
from scripts.offline.plan import write_plan
from scripts.offline.plan_model import Plan, PlannedResource
from tests.plan.fixtures import shipped_plan

STACKS = ["dev", "prod"]


# --- the secrets provider --------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", STACKS)
def test_shipped_stacks_use_a_kms_secrets_provider(stack: str) -> None:
    assert secrets_provider_problems(stack_file(stack)) == []


@pytest.mark.parametrize(("provider", "message"), [
    (None, "no secrets provider"),
    ("passphrase", "not an AWS KMS key"),
    ("awskms://alias/slurm-eks-prod-pulumi", "not an AWS KMS key"),  # no region: gocloud asks the environment
])
def test_a_stack_without_a_kms_provider_is_refused(tmp_path: Path, provider: str | None, message: str) -> None:
    document = yaml.safe_load(stack_file("prod").read_text())
    document.pop("secretsprovider")
    if provider:
        document["secretsprovider"] = provider
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump(document))
    [problem] = secrets_provider_problems(path)
    assert message in problem.message and problem.path == "secretsprovider" and "awskms://" in problem.fix


# --- no secret in the plan's files -----------------------------------------------------------------------

def mock_secret_values(plan: Plan) -> dict[str, str]:
    """What RealisticMocks (scripts/offline/mocks.py `_computed`) returns as each random resource's `result`."""
    return {r.urn: f"planned-{_digest(r.type, r.name, n=24)}" for r in plan.resources if r.type.startswith("random:")}


def leaks(plan: Plan, out: Path) -> list[str]:
    """Every file of the written plan that carries a generated secret's value."""
    write_plan(plan, out)
    values = mock_secret_values(plan)
    assert values, "the plan has no generated secrets to look for"
    return sorted(f"{path.relative_to(out)}: {urn}" for path in out.rglob("*") if path.is_file()
                  for urn, value in values.items() if value in path.read_text())


@pytest.mark.parametrize("stack", STACKS)
def test_no_generated_secret_in_any_plan_file(stack: str, tmp_path: Path) -> None:
    assert leaks(shipped_plan(stack), tmp_path) == []


def test_a_config_map_carrying_a_password_is_caught(tmp_path: Path) -> None:
    plan = copy.deepcopy(shipped_plan("dev"))
    urn, value = next(iter(mock_secret_values(plan).items()))
    plan.resources.append(PlannedResource(
        urn="urn:pulumi:dev::slurm-eks::kubernetes:core/v1:ConfigMap::leak", type="kubernetes:core/v1:ConfigMap",
        name="leak", parent=None, provider=None, dependencies=[], custom=True, protect=False, retain_on_delete=False,
        inputs={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "leak", "namespace": "slurm"},
                "data": {"slurmdbd.conf": f"StoragePass={value}\n"}}))
    found = leaks(plan, tmp_path)
    assert f"plan.json: {urn}" in found and any(f.startswith("manifests/") for f in found)


def test_rds_master_password_is_not_an_input() -> None:
    [rds] = shipped_plan("prod").of_type("aws:rds/instance:Instance")
    assert rds.inputs.get("manageMasterUserPassword") is True and "password" not in rds.inputs


# --- config rules ----------------------------------------------------------------------------------------

def prod_config() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load((STACKS_DIR / "Pulumi.prod.yaml").read_text())["config"][FULL_KEY])


def errors(raw: dict[str, Any]) -> list[tuple[str, str, Any]]:
    with pytest.raises(ConfigError) as caught:
        parse_cluster_config(raw, "test")
    return [(p.rule, p.path, p.value) for p in caught.value.problems]


def test_backups_and_buckets_reach_the_plan() -> None:
    plan = shipped_plan("prod")
    [fsx] = plan.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fsx.inputs["automaticBackupRetentionDays"] == 7 and fsx.inputs["copyTagsToBackups"] is True


def test_s3_endpoint_policy_names_buckets_only() -> None:
    policy = s3_endpoint_policy("aws", "us-west-2", ("ml-data",))
    resources = [r for s in policy["Statement"] for r in ([s["Resource"]] if isinstance(s["Resource"], str)
                                                           else s["Resource"])]
    assert resources == ["arn:aws:s3:::prod-us-west-2-starport-layer-bucket/*", "arn:aws:s3:::ml-data",
                         "arn:aws:s3:::ml-data/*"]
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert "s3:DeleteObject" not in actions and not any(a.endswith("*") for a in actions)
