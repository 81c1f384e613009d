"""`slurm-eks check`: what the command prints and how it exits."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from components.findings import Finding
from scripts.checks import deploy as check_command  # scripts/cli/check.py imports check_stack when run
from scripts.cli.main import app
from tests.plan.fixtures import shipped_plan

runner = CliRunner()


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_pass_the_deploy_check(stack: str) -> None:
    result = runner.invoke(app, ["check", "--stack", stack])
    assert result.exit_code == 0, result.output
    assert (f"stack {stack}: 0 errors and 0 warnings (rules: network, pod-network, iam, order, eviction, pod-security"
            in result.output)


def test_an_error_is_printed_with_its_fix_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    finding = Finding(rule="network", severity="error", resource="a -> b (tcp 443)", message="nobody admits it",
                      fix="add a rule")
    monkeypatch.setattr(check_command, "check_stack", lambda stack, stacks_dir: (shipped_plan("dev"), [finding]))
    result = runner.invoke(app, ["check", "--stack", "dev"])
    assert result.exit_code == 1
    assert "error[network] a -> b (tcp 443)\n    nobody admits it\n    fix: add a rule\n" in result.output
    assert "stack dev: 1 error and 0 warnings" in result.output


def test_a_bad_config_is_listed_not_planned(tmp_path) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  slurm-eks:cluster:\n    region: nowhere-1\n")
    result = runner.invoke(app, ["check", "--stack", "bad", "--stacks-dir", str(tmp_path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
