"""`slurm-eks policy --stack S`: the command function as scripts/cli/main.py registers it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from policy.pack_config import CONFIG_DIR
from scripts.cli.policy import policy
from tests.config.helpers import raw_config

pytestmark = pytest.mark.slow  # whole plans or the CLI as a process in most tests: `make test-fast` leaves it out

# A stack made from prod in a test takes prod's pack config: its waivers and listed exceptions.
PROD_PACK_CONFIG = CONFIG_DIR / "prod.json"

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
    raw["slurm"]["login"]["allowedCidrs"] = ["0.0.0.0/0"]  # valid config; only the pack's owners may allow it
    code, output = invoke("--stack", "open", "--stacks-dir", str(_stacks_dir(tmp_path, "open", raw)),
                          "--policy-pack-config", str(PROD_PACK_CONFIG))
    assert code == 1, output
    assert "error[no-world-ssh] slurm-login (kubernetes:slinky.slurm.net/v1beta1:LoginSet)" in output
    assert "loadBalancerSourceRanges include 0.0.0.0/0" in output
    assert "fix: list office/VPN ranges in slurm.login.allowedCidrs" in output
    assert "stack open: 1 mandatory and 0 advisory violations" in output


def test_invalid_config_exits_2(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["storage"]["fsx"]["capacityGiB"] = 1000
    code, _ = invoke("--stack", "bad", "--stacks-dir", str(_stacks_dir(tmp_path, "bad", raw)))
    assert code == 2


def test_public_ssh_passes_only_when_the_packs_config_waives_it(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["slurm"]["login"].update(allowedCidrs=["0.0.0.0/0"])  # a valid config: only the pack can allow it
    stacks = str(_stacks_dir(tmp_path, "open", raw))
    code, output = invoke("--stack", "open", "--stacks-dir", stacks, "--policy-pack-config", str(PROD_PACK_CONFIG))
    assert code == 1, output
    assert "error[no-world-ssh]" in output and "loadBalancerSourceRanges include 0.0.0.0/0" in output
    assert "stack open: 1 mandatory" in output  # prod's own waivers and exceptions, not this one
    waiver = tmp_path / "open.json"
    waiver.write_text(json.dumps({**json.loads(PROD_PACK_CONFIG.read_text()),
                                  "no-world-ssh": {"allowPublicLoginSsh": True}}))
    code, output = invoke("--stack", "open", "--stacks-dir", stacks, "--policy-pack-config", str(waiver))
    assert code == 0, output
    assert f"pack config {waiver}" in output


def test_a_bad_pack_config_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "prod.json"
    bad.write_text(json.dumps({"no-world-ssh": {"allowPublicSSH": True}}))  # misspelt: not a waiver
    code, output = invoke("--stack", "prod", "--policy-pack-config", str(bad))
    assert code == 2
    assert "allowPublicSSH: not a config property" in output


def test_shipped_stacks_use_their_pack_config() -> None:
    code, output = invoke("--stack", "dev")
    assert code == 0, output
    assert f"pack config {CONFIG_DIR / 'dev.json'}" in output
