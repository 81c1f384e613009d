"""jobs/recipes/deepspeed_config.py: the ZeRO-3 config as DeepSpeed 0.19.8's own parser and the Hugging Face
integration read it, and `slurm-eks job deepspeed-config` for the stacks' partitions."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from jobs.recipes import deepspeed_config
from jobs.recipes.deepspeed_config import zero3_config
from scripts.cli.main import app
from tests.conftest import REPO, require_module
from tests.recipes.conftest import RECIPE_DEPS


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["job", "deepspeed-config", *args], env={"NO_COLOR": "1", "COLUMNS": "300"})


def test_the_cli_writes_the_config_for_a_gpu_partition(tmp_path: Path) -> None:
    out = tmp_path / "ds_zero3.json"
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--offload", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text()) == zero3_config(offload=True)
    assert "ZeRO-3, bf16, for partition gpu-h100: p5.48xlarge, 8 x H100" in result.output
    assert "offloaded to pinned host memory (256 GiB per GPU)" in result.output  # 2048 GiB / 8 GPUs
    plain = _cli("-s", "dev", "-p", "gpu")
    assert plain.exit_code == 0 and json.loads(plain.output) == zero3_config(offload=False)


def test_the_cli_side_imports_no_training_library() -> None:
    """`job deepspeed-config` runs on the login pod: writing the config needs no torch or DeepSpeed."""
    code = ("import sys, jobs.recipes.deepspeed_config; "
            "print(sorted({'torch', 'transformers', 'deepspeed', 'peft'} & set(sys.modules)))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


def test_the_config_has_the_briefs_fields_and_leaves_sizes_to_the_trainer() -> None:
    config: Any = zero3_config(offload=False)
    assert config["bf16"] == {"enabled": True}
    zero = config["zero_optimization"]
    assert (zero["stage"], zero["overlap_comm"], zero["contiguous_gradients"]) == (3, True, True)
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    auto = ["reduce_bucket_size", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold"]
    assert all(zero[k] == "auto" for k in auto) and "offload_param" not in zero and "optimizer" not in config
    batch = ["train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "gradient_clipping"]
    assert all(config[k] == "auto" for k in batch)
    offload: Any = zero3_config(offload=True)
    for part in ("offload_optimizer", "offload_param"):
        assert offload["zero_optimization"][part] == {"device": "cpu", "pin_memory": True}
    assert offload["optimizer"]["type"] == "AdamW"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-s", "prod", "-p", "trainium"], "partition trainium has no NVIDIA GPUs"),
        (["-s", "prod", "-p", "gpu-h10"], "did you mean 'gpu-h100'?"),
        (["-s", "prdo", "-p", "gpu-h100"], "did you mean `prod`?"),
    ],
)
def test_partitions_deepspeed_cannot_use_are_refused(args: list[str], message: str) -> None:
    result = _cli(*args)
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_a_gpu_without_bf16_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deepspeed_config, "BF16_GPUS", frozenset({"H100"}))
    result = _cli("-s", "prod", "-p", "gpu-a100")
    assert result.exit_code == 2 and "A100 is not known to have bf16" in result.output


# DeepSpeed's and transformers' own readings of the file.

@pytest.fixture
def hf_filled() -> Iterator[Any]:
    """The offload config as the Trainer hands it to DeepSpeed: TrainingArguments(deepspeed=...) fills the
    batch sizes and clipping, trainer_config_finalize the model-size ones (hidden size 32)."""
    require_module("deepspeed", RECIPE_DEPS)
    require_module("transformers", RECIPE_DEPS)
    from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    args = TrainingArguments(output_dir="unused", deepspeed=zero3_config(offload=True), bf16=True, use_cpu=True,
                             per_device_train_batch_size=2, gradient_accumulation_steps=4, max_grad_norm=0.5,
                             learning_rate=3e-4, report_to="none")  # fmt: skip
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4))  # fmt: skip
    args.hf_deepspeed_config.trainer_config_finalize(args, model, num_training_steps=10)
    try:
        yield args.hf_deepspeed_config.config
    finally:
        unset_hf_deepspeed_config()  # the process-wide "ZeRO-3 is on" switch: off for the other tests


def test_the_trainer_fills_every_auto(hf_filled: Any) -> None:
    assert "auto" not in json.dumps(hf_filled)
    assert (hf_filled["train_micro_batch_size_per_gpu"], hf_filled["gradient_accumulation_steps"],
            hf_filled["train_batch_size"], hf_filled["gradient_clipping"]) == (2, 4, 8, 0.5)  # fmt: skip
    zero = hf_filled["zero_optimization"]
    # transformers/integrations/deepspeed.py trainer_config_finalize: hidden^2, 0.9 hidden^2, 10 hidden
    assert (zero["reduce_bucket_size"], zero["stage3_prefetch_bucket_size"],
            zero["stage3_param_persistence_threshold"]) == (1024, 921, 320)  # fmt: skip
    assert hf_filled["optimizer"]["params"]["lr"] == 3e-4


def test_deepspeeds_parser_reads_the_filled_config(hf_filled: Any) -> None:
    from deepspeed.runtime.config import DeepSpeedConfig

    parsed = DeepSpeedConfig(hf_filled)  # no process group: DeepSpeed takes a world of one (config.py)
    zero = parsed.zero_config
    assert parsed.zero_optimization_stage == 3 and parsed.bfloat16_config.enabled
    assert (parsed.train_batch_size, parsed.gradient_accumulation_steps, parsed.gradient_clipping) == (8, 4, 0.5)
    assert zero.offload_optimizer.device == "cpu" and zero.offload_optimizer.pin_memory
    assert zero.offload_param.device == "cpu" and zero.offload_param.pin_memory
    assert zero.overlap_comm and zero.contiguous_gradients and zero.gather_16bit_weights_on_model_save
    assert (zero.reduce_bucket_size, zero.prefetch_bucket_size, zero.param_persistence_threshold) == (1024, 921, 320)
    assert parsed.optimizer_name == "adamw"
