"""`slurm-eks policy --stack S`: the command function as scripts/cli/main.py registers it."""

from __future__ import annotations

from pathlib import Path

import typer
import yaml
from typer.testing import CliRunner

from scripts.cli.policy import policy
from tests.config.helpers import raw_config

app = typer.Typer()
app.command()(policy)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _stacks_dir(tmp_path: Path, name: str, raw: dict) -> Path:
    (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    return tmp_path


def test_shipped_prod_passes() -> None:
    code, output = invoke("--stack", "prod")
    assert code == 0, output
    assert "stack prod: 0 mandatory and 0 advisory violations" in output


def test_violation_prints_rule_resource_message_and_fix_and_exits_1(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"]["capacityType"] = "spot"  # a config warning, a policy violation
    code, output = invoke("--stack", "spotty", "--stacks-dir", str(_stacks_dir(tmp_path, "spotty", raw)))
    assert code == 1, output
    assert "mandatory[efa-no-spot] partition-gpu-h100-nodepool (kubernetes:karpenter.sh/v1:NodePool)" in output
    assert "may launch spot nodes" in output
    assert "fix: set the partition's capacityType to on-demand or reserved" in output
    assert "stack spotty: 1 mandatory and 0 advisory violations" in output


def test_invalid_config_exits_2(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["capacityGiB"] = 1000
    code, _ = invoke("--stack", "bad", "--stacks-dir", str(_stacks_dir(tmp_path, "bad", raw)))
    assert code == 2


def test_public_ssh_passes_only_when_the_stack_asks_for_it(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["slurm"]["login"].update(allowedCidrs=["0.0.0.0/0"], allowPublicSsh=True)
    code, output = invoke("--stack", "open", "--stacks-dir", str(_stacks_dir(tmp_path, "open", raw)))
    assert code == 0, output  # the login Service carries slurm-eks.io/allow-public-ssh: "true"
