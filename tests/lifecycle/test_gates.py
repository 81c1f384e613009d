"""`slurm-eks preview|up|destroy`: every gate runs before Pulumi, a stack that fails any of them never reaches it,
and what reaches it is the command with the policy pack bound. Pulumi is the stand-in tests/standins/pulumi (it
records its argv); the AWS account is moto's, prepared for prod (tests/preflight/conftest.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from components.findings import Finding
from scripts.checks import deploy
from scripts.checks import policy as policy_check
from scripts.cli.main import app
from tests.config.helpers import raw_config
from tests.preflight.conftest import aws, prod_account, quotas  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow  # each plans prod offline

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "tests" / "standins"


@pytest.fixture
def pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in first on PATH; returns the file its calls are recorded in."""
    record = tmp_path / "pulumi-calls.jsonl"
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_STANDIN_RECORD", str(record))
    return record


def calls(record: Path) -> list[list[str]]:
    return [json.loads(line)["argv"] for line in record.read_text().splitlines()] if record.exists() else []


def handed_over(record: Path) -> list[list[str]]:
    """The calls that preview or deploy (reading the deployed record, `stack output`, comes first and changes
    nothing)."""
    return [argv for argv in calls(record) if argv[0] in ("preview", "up", "destroy")]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


def test_a_stack_that_passes_every_gate_is_handed_to_pulumi_with_the_policy_pack(
    pulumi: Path, prod_account: dict  # noqa: F811
) -> None:
    result = invoke("up", "--stack", "prod", "--yes")
    assert result.exit_code == 0, result.output
    for gate in ("validate: passed", "deploy check: passed", "policy pack: passed", "preflight: passed"):
        assert gate in result.output
    pack = ["--policy-pack", str(REPO / "policy"), "--policy-pack-config", str(REPO / "policy/config/prod.json")]
    assert calls(pulumi) == [
        ["stack", "output", "deployedConfig", "--json", "--stack", "prod", "--cwd", str(REPO)],  # the record
        ["preview", "--stack", "prod", "--cwd", str(REPO), *pack, "--json"],  # replacements, before
        ["up", "--stack", "prod", "--cwd", str(REPO), "--non-interactive", *pack, "--yes"]]
    assert "no deployed record" in result.output
    given = json.loads(pulumi.read_text().splitlines()[-1])["env"]
    assert len(given["SLURM_EKS_PLAN_DIGEST"]) == 64 and "SLURM_EKS_APPLY_IMMEDIATELY" not in given


def test_pulumis_exit_status_is_the_commands(pulumi: Path, prod_account: dict,  # noqa: F811
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_STANDIN_EXIT", "255")
    assert invoke("preview", "--stack", "prod").exit_code == 255
    assert calls(pulumi)[1][:3] == ["preview", "--stack", "prod"] and "--yes" not in calls(pulumi)[1]


def test_a_failing_preflight_refuses(pulumi: Path, prod_account: dict) -> None:  # noqa: F811
    prod_account["L-417A185B"] = 0  # no P-instance vCPUs in the account
    result = invoke("up", "--stack", "prod")
    assert result.exit_code == 1 and handed_over(pulumi) == []
    assert "preflight: 1 error(s)" in result.output and "not handed to Pulumi" in result.output


def test_no_credentials_means_no_preflight_and_no_deployment(pulumi: Path, aws: None,  # noqa: F811
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = invoke("up", "--stack", "dev")
    assert result.exit_code == 1 and handed_over(pulumi) == []
    assert "preflight: not run (cannot use AWS credentials" in result.output


def test_a_config_error_refuses_before_planning(pulumi: Path, tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"]["maxNodes"] = -1
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    result = invoke("up", "--stack", "bad", "--stacks-dir", str(tmp_path))
    assert result.exit_code == 1 and handed_over(pulumi) == []
    assert "partitions.gpu-h100.maxNodes" in result.output and "validate: 1 error(s)" in result.output
    assert "gate: plan" not in result.output  # nothing planned on a config that must not deploy


@pytest.mark.parametrize("gate", ["deploy check", "policy pack"])
def test_an_error_of_the_deploy_check_or_the_policy_pack_refuses(
    pulumi: Path, prod_account: dict, monkeypatch: pytest.MonkeyPatch, gate: str  # noqa: F811
) -> None:
    """Their rules fire on their own fixtures (tests/checks, tests/policy); here: that an error of either stops `up`."""
    error = Finding(rule="stand-in", severity="error", message="a blocking finding", fix="none")
    module = deploy if gate == "deploy check" else policy_check
    monkeypatch.setattr(module, "check_plan", lambda *args: [error])
    result = invoke("up", "--stack", "prod", "--yes")
    assert result.exit_code == 1 and handed_over(pulumi) == []
    assert f"{gate}: 1 error(s)" in result.output


def test_destroy_says_what_stays_and_keeps_it(pulumi: Path) -> None:
    result = invoke("destroy", "--stack", "prod", "--yes")
    assert result.exit_code == 0, result.output
    assert "protected resources stay" in result.output and "pulumi state unprotect <URN>" in result.output
    assert "aws:rds/instance:Instance" in result.output
    assert "(retained even if removed from the program)" in result.output
    assert calls(pulumi) == [["destroy", "--stack", "prod", "--cwd", str(REPO), "--non-interactive",
                              "--exclude-protected", "--yes"]]


def test_without_pulumi_on_path_it_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    result = invoke("destroy", "--stack", "dev")
    assert result.exit_code == 2 and "the `pulumi` CLI is not on PATH: install it" in result.output
