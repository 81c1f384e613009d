"""The checkpoint manager in rendered scripts: from the stack's storage.checkpointStore, a partition's cadence and a
job's flags; and the config rule that keeps the store out of the FSx data repositories' prefixes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from components.config.problems import ConfigError
from components.config.stackfile import load_stack
from jobs.render import RenderError, render_job, target_for_partition, with_checkpoint_sync
from scripts.cli.main import app
from tests.conftest import REPO

STORE = """      checkpointStore:
        s3: s3://ml-checkpoint-store/jobs
        intervalSeconds: 600
"""
ENTRY = ["jobs/train.py", "--steps", "100"]


def prod_with(tmp_path: Path, store: str = STORE, partition_extra: str = "") -> Path:
    text = (REPO / "stacks" / "Pulumi.prod.yaml").read_text()
    shipped = "      checkpointStore:\n        s3: s3://ml-data/checkpoint-store\n"
    assert shipped in text, "prod's own store, replaced by each case's"
    text = text.replace(shipped, store, 1)
    if partition_extra:
        head = "    partitions:\n      gpu-h100:\n"
        text = text.replace(head, head + partition_extra, 1)
    (tmp_path / "Pulumi.prod.yaml").write_text(text)
    return tmp_path


def script(stacks: Path, partition: str = "gpu-h100", **flags: object) -> str:
    config, _ = load_stack("prod", stacks)
    target = with_checkpoint_sync(target_for_partition(config, "prod", partition, image="r.example.com/t:1"), **flags)
    return render_job(target, ENTRY)


def test_the_stacks_store_is_in_every_rendered_script(tmp_path: Path) -> None:
    text = script(prod_with(tmp_path))
    assert "CHECKPOINT_S3=s3://ml-checkpoint-store/jobs" in text
    assert "checkpoint_store restore" in text and "--interval 600 --keep 3 --compression zstd" in text
    # the restore runs before training, the last copy after it and before the outcome is read
    assert text.index("checkpoint_store restore") < text.index("run_step torchrun") < text.index(
        "\nfinish_checkpoint_sync\n") < text.index('-e "${SLURM_EKS_CHECKPOINT_DIR}/DONE"')
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


def test_a_partition_and_a_job_change_the_cadence(tmp_path: Path) -> None:
    stacks = prod_with(tmp_path, partition_extra="        checkpointStore:\n          keep: 5\n")
    assert "--interval 600 --keep 5" in script(stacks)
    assert "--interval 600 --keep 3" in script(stacks, "gpu-a100")
    assert "--interval 120 --keep 2" in script(stacks, interval_seconds=120, keep=2)
    assert "checkpoint_store" not in script(stacks, off=True)


def test_without_a_store_nothing_is_copied_unless_asked(tmp_path: Path) -> None:
    stacks = prod_with(tmp_path, store="")
    assert "checkpoint_store" not in script(stacks)
    assert "CHECKPOINT_S3=s3://mine/x" in script(stacks, s3="s3://mine/x")
    with pytest.raises(RenderError, match="need a checkpoint store"):
        script(stacks, keep=2)


@pytest.mark.parametrize(("flags", "message"), [
    ({"s3": "mine/x"}, "not an S3 location"), ({"interval_seconds": 5}, "30 seconds or more"),
    ({"keep": 0}, "keep 1 or more")])  # fmt: skip
def test_bad_job_settings_are_refused(tmp_path: Path, flags: dict[str, object], message: str) -> None:
    with pytest.raises(RenderError, match=message):
        script(prod_with(tmp_path), **flags)


def test_the_cli_flags_reach_the_script(tmp_path: Path) -> None:
    stacks = prod_with(tmp_path)
    result = CliRunner().invoke(app, ["job", "render", "--stack", "prod", "--stacks-dir", str(stacks), "--partition",
                                      "gpu-h100", "--checkpoint-keep", "7", "--", *ENTRY])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "--interval 600 --keep 7" in result.stdout
    refused = CliRunner().invoke(app, ["job", "render", "--stack", "prod", "--stacks-dir", str(stacks), "--partition",
                                       "gpu-h100", "--checkpoint-sync-interval", "1", "--", *ENTRY])  # fmt: skip
    assert refused.exit_code == 2 and "--checkpoint-sync-interval 1: give 30 seconds or more" in refused.output


@pytest.mark.parametrize(("store", "message"), [
    ("      checkpointStore:\n        s3: ml-store\n", "storage.checkpointStore.s3"),
    ("      checkpointStore:\n        s3: s3://ml-data/checkpoints/store\n", "overlaps storage.fsx.repositories[1]"),
    ("      checkpointStore:\n        s3: s3://ml-data\n", "overlaps storage.fsx.repositories[0]"),
    ("      checkpointStore:\n        s3: s3://a-b/c\n        keep: 0\n", "keep"),
])  # fmt: skip
def test_the_config_refuses_a_store_that_cannot_work(tmp_path: Path, store: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_stack("prod", prod_with(tmp_path, store=store))
    assert message in raised.value.render()
