"""`slurm-eks init NAME --from STACK`: a new stack file with the source's settings and comments, what names the stack
renamed, written whole and validated; never over an existing stack, never under a bad name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from components.config.stackfile import STACKS_DIR, load_stack
from scripts.cli.main import app


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    shutil.copytree(STACKS_DIR, tmp_path / "stacks")
    return tmp_path / "stacks"


def init(stacks: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["init", *args, "--stacks-dir", str(stacks)], env={"COLUMNS": "200"})


def test_a_new_stack_from_prod_renames_what_names_the_stack_and_validates(stacks: Path) -> None:
    result = init(stacks, "staging", "--from", "prod")
    assert result.exit_code == 0, result.output
    assert f"wrote {stacks / 'Pulumi.staging.yaml'} (from prod; 3 partition(s)): valid" in result.output
    text = (stacks / "Pulumi.staging.yaml").read_text()
    assert text.startswith("# Stack staging, made by `slurm-eks init staging --from prod` on ")
    document = yaml.safe_load(text)
    assert document["secretsprovider"] == "awskms://alias/slurm-eks-staging-pulumi?region=us-west-2"
    cluster = document["config"]["slurm-eks:cluster"]
    assert cluster["clusterName"] == "ml-training-staging" and cluster["tags"]["environment"] == "staging"
    prod = yaml.safe_load((stacks / "Pulumi.prod.yaml").read_text())["config"]["slurm-eks:cluster"]
    assert cluster["partitions"] == prod["partitions"]  # the settings themselves are the source's
    assert "# Production training cluster" in text  # and so are its comments
    config, _ = load_stack("staging", stacks)
    assert config.name_for("staging") == "ml-training-staging"


def test_the_source_stacks_wrapped_key_is_not_copied(stacks: Path) -> None:
    source = stacks / "Pulumi.dev.yaml"
    source.write_text(source.read_text() + "encryptedkey: AQICAHh0example\n")
    assert init(stacks, "mine").exit_code == 0
    assert "encryptedkey" not in yaml.safe_load((stacks / "Pulumi.mine.yaml").read_text())


@pytest.mark.parametrize(("args", "message"), [
    (["dev"], "Pulumi.dev.yaml exists: choose another name, or edit that file"),
    (["x y"], "stack name 'x y': use letters, digits, '-', '_' or '.'"),
    (["a/b"], "stack name 'a/b': use letters"),
    (["new", "--from", "nope"], "--from nope: no "),
])
def test_refusals_write_nothing(stacks: Path, args: list[str], message: str) -> None:
    before = sorted(p.name for p in stacks.iterdir())
    result = init(stacks, *args)
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, result.output
    assert sorted(p.name for p in stacks.iterdir()) == before
