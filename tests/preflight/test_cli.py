"""`slurm-eks preflight` as the lead registers it (`app.command()(preflight)`): table, exit codes, and one
clear message instead of a traceback when it cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from scripts.cli.preflight import preflight
from tests.config.helpers import raw_config

app = typer.Typer()
app.command()(preflight)
runner = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"})


def test_prepared_prod_account_exits_0(prod_account: dict) -> None:
    result = runner.invoke(app, ["--stack", "prod"])
    assert result.exit_code == 0, result.output
    assert "preflight prod: account 123456789012, us-west-2" in result.stdout
    assert "0 fail" in result.stdout and "s3://ml-data" in result.stdout


def test_zero_p_quota_exits_1_with_the_fix(prod_account: dict) -> None:
    prod_account["L-417A185B"] = 0
    result = runner.invoke(app, ["--stack", "prod"])
    assert result.exit_code == 1, result.output
    assert "--quota-code L-417A185B --desired-value 3456" in result.stdout and "1 fail" in result.stdout


def test_bad_config_exits_2(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"]["maxNodes"] = -1
    (tmp_path / "Pulumi.bad.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    result = runner.invoke(app, ["--stack", "bad", "--stacks-dir", str(tmp_path)])
    assert result.exit_code == 2 and "partitions.gpu-h100.maxNodes" in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize(("args", "env", "message"), [
    ([], {}, "Unable to locate credentials"),
    (["--profile", "nope"], {}, "profile nope"),
    ([], {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
          "AWS_MAX_ATTEMPTS": "1"}, "Could not connect to the endpoint URL"),
])
def test_no_credentials_or_endpoint_exits_2_without_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             args: list[str], env: dict, message: str) -> None:
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    result = runner.invoke(app, ["--stack", "prod", *args], env=env)
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output
    assert "set AWS credentials" in result.stderr
