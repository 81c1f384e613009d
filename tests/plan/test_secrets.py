"""Secrets stay secret: stack files name a KMS secrets provider, no generated secret reaches any file of the
offline plan (plan.json, manifests/) except as a `[secret]` marker, and the storage/network config rules that
keep data safe fire on configs that break them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from components.aws.vpc import s3_endpoint_policy
from components.config.cluster import FULL_KEY
from components.config.problems import ConfigError
from components.config.stack_secrets import secrets_provider_problems
from components.config.stackfile import STACKS_DIR, stack_file
from components.config.validation import parse_cluster_config
from scripts.cli.main import app
from scripts.offline.mocks import _digest
from scripts.offline.plan import write_plan
from scripts.offline.plan_model import Plan, PlannedResource
from tests.plan.fixtures import shipped_plan

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

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
    return [(p.rule, p.path, p.value) for p in caught.value.findings]


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


def preview_comment(plan: Plan, tmp_path: Path) -> str:
    """The markdown the offline preview job posts on the pull request, against a base where every resource had
    no inputs: every input of every resource is then a change the diff prints."""
    write_plan(plan, tmp_path / "head")
    base = copy.deepcopy(plan)
    for resource in base.resources:
        resource.inputs = {}
    write_plan(base, tmp_path / "base")
    result = CliRunner().invoke(app, ["diff", str(tmp_path / "base"), str(tmp_path / "head"), "--format", "markdown"])
    assert result.exit_code == 0, result.output[-500:]
    return result.output


@pytest.mark.parametrize("stack", STACKS)
def test_no_generated_secret_in_what_the_preview_workflow_posts(stack: str, tmp_path: Path) -> None:
    """The offline preview job (.github/workflows/preview.yml) posts `slurm-eks diff --format markdown` as a PR
    comment and prints `slurm-eks policy` and `slurm-eks check` into the job summary: none may carry a secret."""
    plan = shipped_plan(stack)
    comment = preview_comment(plan, tmp_path)
    assert "[secret]" in comment  # not vacuous: the diff shows the secret inputs, masked
    summaries = [CliRunner().invoke(app, [command, "--stack", stack]) for command in ("policy", "check")]
    assert [r.exit_code for r in summaries] == [0, 0], [r.output[-500:] for r in summaries]
    values = mock_secret_values(plan)
    assert [urn for text in (comment, *(r.output for r in summaries)) for urn, value in values.items()
            if value in text] == []


def test_the_workflow_output_grep_fires(tmp_path: Path) -> None:
    plan = copy.deepcopy(shipped_plan("dev"))
    value = next(iter(mock_secret_values(plan).values()))
    next(r for r in plan.resources if r.inputs.get("kind") == "ConfigMap").inputs["data"] = {"leak": value}
    assert value in preview_comment(plan, tmp_path)
