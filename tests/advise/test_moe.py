"""`slurm-eks advise --model <mixture-of-experts preset>`: the layouts it picks (FSDP x EP x PP through torchtitan),
its memory arithmetic by hand, its refusals, and the render command it prints, rendered for real. That torchtitan
builds the presets' models with these counts and resolves the printed flags: tests/recipes/test_titan.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from components.config.stackfile import STACKS_DIR, load_stack
from scripts.advise.hardware import Partition, partition_hardware
from scripts.advise.memory import GIB, RUNTIME_GIB
from scripts.advise.models import AdviseError
from scripts.advise.moe import MOE_PRESETS, MoeLayout, advise_moe, moe_memory, titan_flags
from scripts.cli.main import app


def _partition(stack: str, name: str) -> Partition:
    config, _ = load_stack(stack, STACKS_DIR)
    return partition_hardware(config, stack, name)


def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["advise", *args], env={"NO_COLOR": "1", "COLUMNS": "200"})


def test_active_parameters_are_the_published_ones() -> None:
    # Qwen3-30B-A3B: 3.3B active; Qwen3 and DeepSeek-V3's model cards: 671B total, 37B active.
    active = {name: round(p.shape.active_params / 1e9, 2) for name, p in MOE_PRESETS.items()}
    assert active == {"qwen3-moe-debug": 0.05, "qwen3-30b-a3b": 3.35, "deepseek-v3-16b": 2.66,
                      "deepseek-v3-671b": 37.55}


@pytest.mark.parametrize(("model", "layout", "nodes"), [
    ("qwen3-30b-a3b", "FSDP 8 x EP 8", 1),  # 61 GB of model state over 8 GPUs, full AC (the config's)
    ("deepseek-v3-16b", "FSDP 8 x EP 8", 1),
    ("qwen3-moe-debug", "FSDP 8 x EP 8", 1),
])  # fmt: skip
def test_the_pinned_choices(model: str, layout: str, nodes: int) -> None:
    advice = advise_moe(MOE_PRESETS[model], _partition("prod", "gpu-h100"))
    assert (advice.layout.describe(), advice.layout.nodes) == (layout, nodes)
    assert advice.memory.total <= 80


def test_671b_names_the_node_count_it_needs() -> None:
    with pytest.raises(AdviseError) as raised:
        advise_moe(MOE_PRESETS["deepseek-v3-671b"], _partition("prod", "gpu-h100"))
    message = str(raised.value)
    assert "does not fit partition gpu-h100 of stack prod on up to 8 nodes" in message
    assert "FSDP 64 x EP 8 (full activation checkpointing) on 8 nodes, needs 193.0 GiB per GPU of 80" in message
    assert message.endswith("it fits on 31 nodes: raise partitions.gpu-h100.maxNodes to 31")


def test_qwen3_30b_on_one_node_by_hand() -> None:
    preset = MOE_PRESETS["qwen3-30b-a3b"]
    shape = preset.shape
    layout = MoeLayout(nodes=1, dp_shard=8, ep=8, micro_batch=1, grad_accum=128)
    m = moe_memory(preset, layout, 4096, 80)
    layer = (shape.params - 2 * shape.vocab * shape.dim) / 48
    dense = layer - shape.routed_params / 48
    gathered = dense + shape.routed_params / 48 / 8  # a layer's experts gathered among the 1 rank per expert group
    stage = 48 * layer + 2 * shape.vocab * shape.dim
    assert m.weights == pytest.approx((stage * 4 / 8 + 2 * gathered * 2 + shape.vocab * shape.dim * 2) / GIB)
    assert m.gradients == pytest.approx((stage * 4 / 8 + gathered * 6) / GIB)
    assert m.optimizer == pytest.approx(stage * 8 / 8 / GIB)
    per_token = 16 * 2048 + 4 * 32 + 8 * (8 * 768) + 4 * 8 * 2048 + 4 * 128  # a layer, recomputed (full AC)
    kept = 48 * 4096 * 2 * 2048 + 4096 * per_token
    assert m.activations == pytest.approx((kept + 4096 * (4 * 2048 + 12 * 151_936)) / GIB)
    assert m.reserve == pytest.approx(RUNTIME_GIB + 8.0)


def test_expert_parallelism_stays_inside_a_node_and_divides_the_experts() -> None:
    h100 = _partition("prod", "gpu-h100")
    advice = advise_moe(MOE_PRESETS["qwen3-30b-a3b"], h100, nodes=4)
    assert (advice.layout.dp_shard, advice.layout.ep) == (32, 8)


def test_the_flags_end_with_the_checkpointing_subcommand() -> None:
    preset = MOE_PRESETS["deepseek-v3-671b"]
    flags = titan_flags(preset, MoeLayout(31, 248, 8, full_checkpointing=True), 4096, 992)
    assert flags[:4] == ["--module", "deepseek_v3", "--config", "deepseek_v3_671b"]
    assert flags[-2:] == ["--training.disable_cuda_graphs", "activation-checkpoint:full"]
    single = titan_flags(MOE_PRESETS["qwen3-moe-debug"], MoeLayout(1, 1, 1), 4096, 8)
    assert "--training.disable_cuda_graphs" not in single and "activation-checkpoint:full" not in single


def test_refusals() -> None:
    with pytest.raises(AdviseError, match="runs on NVIDIA GPUs; partition trainium has Trainium"):
        advise_moe(MOE_PRESETS["qwen3-30b-a3b"], _partition("prod", "trainium"))
    with pytest.raises(AdviseError, match="outside partition gpu-h100's 1 to 8"):
        advise_moe(MOE_PRESETS["qwen3-30b-a3b"], _partition("prod", "gpu-h100"), nodes=9)
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--model", "qwen3-30b-a3b", "--dim", "4096")
    assert result.exit_code != 0 and "--model qwen3-30b-a3b is a preset with its own shape: drop --dim" in result.output


def test_the_cli_prints_the_layout_and_a_command_that_renders(tmp_path: Path) -> None:
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--model", "qwen3-30b-a3b")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "qwen3-30b-a3b: 30.5B parameters, 3.35B active a token" in out
    assert "recommended: FSDP 8 x EP 8 on 1 node (8 GPUs), local batch 1 x 128 accumulation steps" in out
    command = out.splitlines()[-1].strip()
    words = shlex.split(command)
    cut = words.index("--")
    assert words[cut + 1:cut + 6] == ["jobs/recipes/titan.py", "--module", "qwen3", "--config", "qwen3_30b_a3b"]
    script = tmp_path / "moe.sbatch"
    rendered = CliRunner().invoke(app, [*words[1:cut], "-o", str(script), *words[cut:]], env={"NO_COLOR": "1"})
    assert rendered.exit_code == 0, rendered.output
    text = script.read_text()
    assert "jobs/recipes/titan.py --module qwen3 --config qwen3_30b_a3b" in text
    assert 'NCCL_NET="${NCCL_NET:-Libfabric}"' in text  # EFA expected: no silent fall-back to sockets


def test_the_json_answer() -> None:
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--model", "deepseek-v3-16b", "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["model"]["torchtitan"] == {"module": "deepseek_v3", "config": "deepseek_v3_16b", "flavor": "16B"}
    assert answer["recommended"]["describe"] == "FSDP 8 x EP 8"
    assert answer["recommended"]["command"].startswith("slurm-eks job render --stack prod --partition gpu-h100")
