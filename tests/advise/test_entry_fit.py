"""`job render` refuses a jobs/train.py layout that advise's memory model says cannot fit (scripts/advise/
entry_fit.py), with the numbers and the advise command; advise's own recommendations render (test_advise.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner, Result

from components.config.stackfile import load_stack
from scripts.advise.entry_fit import TRAIN_DEFAULTS, entry_fit
from scripts.advise.hardware import partition_hardware
from scripts.cli.main import app
from tests.conftest import require_module

H100_8B = ["jobs/train.py", "--model", "llama3-8b", "--seq-len", "8192", "--batch-size", "1"]


def _render(*args: str) -> Result:
    return CliRunner().invoke(app, ["job", "render", "--stack", "prod", "--partition", "gpu-h100", *args],
                              env={"NO_COLOR": "1", "COLUMNS": "400"})  # fmt: skip


def test_plain_ddp_for_8b_is_refused_with_the_numbers_and_the_fix() -> None:
    result = _render("--nodes", "2", "--", *H100_8B)
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "jobs/train.py --model llama3-8b as DDP 16 on 2 node(s), micro-batch 1 of 8192 tokens needs 229.4 GiB " \
           "per GPU of 80" in message
    assert "slurm-eks advise --stack prod --partition gpu-h100 --model llama3-8b --seq-len 8192" in message


def test_the_same_model_sharded_renders_and_the_check_can_be_waived() -> None:
    assert _render("--nodes", "2", "--", *H100_8B, "--fsdp").exit_code == 0
    waived = _render("--nodes", "2", "--no-fit-check", "--", *H100_8B)
    assert waived.exit_code == 0 and "#SBATCH --nodes=2" in waived.output


def test_host_memory_counts_too() -> None:
    config, _ = load_stack("prod")
    part = partition_hardware(config, "prod", "gpu-h100")
    fit = entry_fit(part, [*H100_8B, "--fsdp"], 2)
    assert fit is not None and fit.fits and fit.layout.describe() == "FSDP 16"
    starved = entry_fit(type(part)(**{**part.__dict__, "host_memory_gib": 16.0}), [*H100_8B, "--fsdp"], 2)
    assert starved is not None and not starved.fits
    assert "GiB of host memory per node of the 16 there" in starved.problem("GPU")


def test_checkpointing_every_nth_layer_is_counted() -> None:
    config, _ = load_stack("prod")
    part = partition_hardware(config, "prod", "gpu-h100")
    one_node = [*H100_8B, "--fsdp", "--activation-checkpointing"]
    full, every4 = entry_fit(part, one_node, 1), entry_fit(part, [*one_node, "--ac-every", "4"], 1)
    plain = entry_fit(part, [*H100_8B, "--fsdp"], 1)
    assert full is not None and every4 is not None and plain is not None
    assert full.memory.activations < every4.memory.activations < plain.memory.activations
    assert every4.layout.ac_every == 4 and ", activation checkpointing of every 4th layer" in every4.problem("GPU")


@pytest.mark.parametrize("entry", [
    ["jobs/train.py", "--d-model", "4096"],  # a custom shape: the entry point's own check
    ["jobs/recipes/hf_finetune.py", "--model", "llama3-8b"],  # not jobs/train.py
    ["jobs/train.py", "--model", "llama3-8b", "--tp", "3"],  # does not divide the devices: train.py refuses it
])
def test_what_it_cannot_judge_it_leaves_alone(entry: list[str]) -> None:
    config, _ = load_stack("prod")
    assert entry_fit(partition_hardware(config, "prod", "gpu-h100"), entry, 2) is None


def test_trainium_commands_are_judged_by_the_same_model_as_advise() -> None:
    """Replicating Llama 3 8B on trn1's 16 GiB NeuronCores cannot run; render refuses it as advise would."""
    config, _ = load_stack("prod")
    fit = entry_fit(partition_hardware(config, "prod", "trainium"), ["jobs/train.py", "--model", "llama3-8b"], 1)
    assert fit is not None and not fit.fits
    assert "per NeuronCore of 16" in fit.problem("NeuronCore")


def test_the_defaults_are_the_entry_points() -> None:
    require_module("torch", "pip install -e '.[jobs]': the training config imports torch")
    from jobs.training.config import build_parser

    defaults = build_parser().parse_args([])
    assert {name: getattr(defaults, name) for name in TRAIN_DEFAULTS} == TRAIN_DEFAULTS
