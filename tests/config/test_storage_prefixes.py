"""No two stacks of one stacks directory share an S3 prefix (rule storage-prefixes-shared), and `init --from`
moves every S3 location of its source to a prefix of the new stack's own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from components.config.keys import FULL_KEY
from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, load_stack
from components.config.storage_prefixes import moved, overlap, s3_locations, sibling_locations
from scripts.cli.main import app
from scripts.lifecycle.new_stack import NewStackError, new_stack


@pytest.fixture
def stacks(tmp_path: Path) -> Path:
    shutil.copytree(STACKS_DIR, tmp_path / "stacks")
    return tmp_path / "stacks"


def cluster(path: Path) -> dict:
    return yaml.safe_load(path.read_text())["config"][FULL_KEY]


def write(stacks: Path, name: str, raw: dict) -> None:
    (stacks / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": {FULL_KEY: raw}}))


@pytest.mark.parametrize(("a", "b", "shared"), [
    ("s3://b/x", "s3://b/x", True), ("s3://b/x", "s3://b/x/y", True), ("s3://b/x/", "s3://b/x", True),
    ("s3://b", "s3://b/anything", True),  # a bucket with no prefix covers the whole bucket
    ("s3://b/x", "s3://b/xy", False),  # whole segments only
    ("s3://b/x", "s3://c/x", False), ("s3://b/x/y", "s3://b/x/z", False),
])
def test_overlap(a: str, b: str, shared: bool) -> None:
    assert overlap(a, b) is shared and overlap(b, a) is shared


@pytest.mark.parametrize(("uri", "new"), [
    ("s3://ml-data/prod/data", "s3://ml-data/staging/data"),  # a segment named after the stack
    ("s3://ml-prod-data/x", "s3://ml-staging-data/x"),  # a part of the bucket's name
    ("s3://ml-data/training-data", "s3://ml-data/staging/training-data"),  # else a prefix of its own
    ("s3://ml-data", "s3://ml-data/staging"),
    ("s3://ml-data/production/x/", "s3://ml-data/staging/production/x/"),
])
def test_moved(uri: str, new: str) -> None:
    assert moved(uri, "prod", "staging") == new


def test_the_walk_finds_every_s3_field_of_the_model() -> None:
    """Each S3 field the config has today: a new one is covered by the walk, this names the ones known."""
    paths = {p for p, _ in s3_locations(cluster(STACKS_DIR / "Pulumi.prod.yaml"))}
    assert paths == {"storage.fsx.repositories[0].s3", "storage.fsx.repositories[1].s3", "storage.checkpointStore.s3",
                     "addons.mlflow.artifacts"}


def test_init_from_prod_shares_no_prefix_with_prod(stacks: Path) -> None:
    result = CliRunner().invoke(app, ["init", "staging", "--from", "prod", "--stacks-dir", str(stacks)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    prod = s3_locations(cluster(stacks / "Pulumi.prod.yaml"))
    staging = s3_locations(cluster(stacks / "Pulumi.staging.yaml"))
    assert len(staging) == len(prod) == 4
    assert not [(s, p) for _, s in staging for _, p in prod if overlap(s, p)]
    assert ("storage.fsx.repositories[0].s3: s3://ml-data/training-data -> s3://ml-data/staging/training-data"
            in result.output)
    assert "addons.mlflow.artifacts: s3://ml-data/mlflow -> s3://ml-data/staging/mlflow" in result.output
    text = (stacks / "Pulumi.staging.yaml").read_text()
    assert "# No DELETED: pruning old checkpoints on /shared" in text  # comments kept
    load_stack("staging", stacks)  # and the rule passes it


def test_init_refuses_a_location_it_cannot_move_in_the_text() -> None:
    source = 'config:\n  slurm-eks:cluster:\n    addons:\n      mlflow: {artifacts: "s3://ml-data/ml\\x66low"}\n'
    with pytest.raises(NewStackError, match=r"could not move addons.mlflow.artifacts \(s3://ml-data/mlflow\)"):
        new_stack("staging", "prod", source)


def test_two_stacks_sharing_a_prefix_are_refused_naming_both(stacks: Path) -> None:
    raw = cluster(stacks / "Pulumi.prod.yaml")
    raw["addons"]["mlflow"]["artifacts"] = "s3://ml-data/mlflow/open"  # inside prod's artifacts
    for key in ("repositories",):
        raw["storage"]["fsx"][key] = []
    raw["storage"]["checkpointStore"]["s3"] = "s3://ml-data-open/store"
    write(stacks, "open", raw)
    with pytest.raises(ConfigError) as caught:
        load_stack("open", stacks)
    found = [f for f in caught.value.findings if f.rule == "storage-prefixes-shared"]
    assert [(f.path, f.value) for f in found] == [("addons.mlflow.artifacts", "s3://ml-data/mlflow/open")]
    assert "stack prod's addons.mlflow.artifacts (s3://ml-data/mlflow)" in found[0].message
    assert "stacks open and prod" in found[0].message
    assert "s3://ml-data/open/mlflow/open" in found[0].fix
    # prod, validated beside it, is refused the same way (the rule is symmetric)
    with pytest.raises(ConfigError, match=r"overlaps stack open's addons\.mlflow\.artifacts"):
        load_stack("prod", stacks)


def test_a_bucket_without_prefix_overlaps_everything_in_it(stacks: Path) -> None:
    raw = cluster(stacks / "Pulumi.dev.yaml")
    raw.setdefault("storage", {})["checkpointStore"] = {"s3": "s3://ml-data"}
    write(stacks, "other", raw)
    with pytest.raises(ConfigError) as caught:
        load_stack("other", stacks)
    assert len([f for f in caught.value.findings if f.rule == "storage-prefixes-shared"]) == 4  # all of prod's


def test_separate_prefixes_pass_and_a_broken_sibling_is_ignored(stacks: Path) -> None:
    raw = cluster(stacks / "Pulumi.dev.yaml")
    raw.setdefault("storage", {})["checkpointStore"] = {"s3": "s3://ml-data/dev/store"}
    write(stacks, "other", raw)
    (stacks / "Pulumi.broken.yaml").write_text("config: [not: {closed")
    write(stacks, "odd", {"storage": "not a mapping", "x": ["s3://elsewhere/odd"]})
    load_stack("other", stacks)
    assert sibling_locations("other", stacks)["odd"] == [("x[0]", "s3://elsewhere/odd")]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_shipped_stacks_share_no_prefix(stack: str) -> None:
    load_stack(stack)
