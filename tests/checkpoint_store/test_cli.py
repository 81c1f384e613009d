"""`slurm-eks ckpt list|restore|prune` against moto's S3, and their refusals (one line, exit 1 or 2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from jobs.checkpoint_layout import complete_checkpoints
from jobs.checkpoint_store.location import JobKey, S3Location
from jobs.checkpoint_store.store import CheckpointStore
from scripts.cli.main import app
from tests.checkpoint_store.conftest import BUCKET
from tests.checkpoint_store.test_store import tree, write_checkpoint

S3 = f"s3://{BUCKET}/store"


def stored(s3: Any, tmp_path: Path, steps: tuple[int, ...] = (10, 20, 30)) -> Path:
    job_dir = tmp_path / "src" / "train-4242"
    store = CheckpointStore(s3, S3Location.parse(S3))
    for step in steps:
        write_checkpoint(job_dir, f"step-{step}", seed=step)
        store.upload(JobKey("alice", "train-4242"), complete_checkpoints(job_dir)[-1])
    return job_dir


def cli(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, ["ckpt", *args], input=input)


def test_list_shows_a_users_checkpoints(s3: Any, tmp_path: Path) -> None:
    stored(s3, tmp_path)
    table = cli("list", "--s3", S3, "--user", "alice")
    assert table.exit_code == 0, table.output
    assert [line.split()[:3] for line in table.stdout.splitlines()[1:]] == [
        ["train-4242", "step-10", "10"], ["train-4242", "step-20", "20"], ["train-4242", "step-30", "30"]]
    as_json = json.loads(cli("list", "train-4242", "--s3", S3, "--user", "alice", "--format", "json").stdout)
    assert as_json["format"] == 1 and [c["step"] for c in as_json["checkpoints"]] == [10, 20, 30]
    assert cli("list", "--s3", S3, "--user", "bob").exit_code == 0


def test_restore_the_newest_or_a_given_step(s3: Any, tmp_path: Path) -> None:
    source = stored(s3, tmp_path)
    target = tmp_path / "shared" / "train-4242"
    newest = cli("restore", "train-4242", "--s3", S3, "--user", "alice", "--to", str(target))
    assert newest.exit_code == 0, newest.output
    assert tree(target / "step-30") == tree(source / "step-30")
    assert f"SLURM_EKS_CHECKPOINT_DIR={target}" in newest.output
    older = cli("restore", "train-4242", "--s3", S3, "--user", "alice", "--to", str(target), "--step", "10")
    assert older.exit_code == 0 and tree(target / "step-10") == tree(source / "step-10")
    missing = cli("restore", "train-4242", "--s3", S3, "--user", "alice", "--to", str(target), "--step", "15")
    assert missing.exit_code == 1 and "no checkpoint of step 15" in missing.output and "10, 20, 30" in missing.output


def test_prune_asks_unless_yes(s3: Any, tmp_path: Path) -> None:
    stored(s3, tmp_path)
    declined = cli("prune", "train-4242", "--s3", S3, "--user", "alice", "--keep", "1", input="n\n")
    assert declined.exit_code == 1 and "delete step-10, step-20 of alice/train-4242" in declined.output
    pruned = cli("prune", "train-4242", "--s3", S3, "--user", "alice", "--keep", "1", "--yes")
    assert pruned.exit_code == 0 and "pruned step-10, step-20" in pruned.output
    left = json.loads(cli("list", "train-4242", "--s3", S3, "--user", "alice", "--format", "json").stdout)
    assert [c["step"] for c in left["checkpoints"]] == [30]


def test_without_a_store_or_with_a_bad_one_it_says_what_to_do(s3: Any) -> None:
    none = cli("list", "--stack", "dev")
    assert none.exit_code == 2 and "stack dev has no storage.checkpointStore" in none.output
    neither = cli("list")
    assert neither.exit_code == 2 and "pass --stack STACK" in neither.output
    bad = cli("list", "--s3", "bucket/x")
    assert bad.exit_code == 2 and "is not an S3 location" in bad.output
    gone = cli("list", "--s3", "s3://no-such-bucket/x", "--user", "alice")
    assert gone.exit_code == 1 and "NoSuchBucket" in gone.output and "Traceback" not in gone.output
    nothing = cli("restore", "train-1", "--s3", S3, "--user", "alice", "--to", "/tmp/x")
    assert nothing.exit_code == 1 and "no checkpoints of alice/train-1" in nothing.output
