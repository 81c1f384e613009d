"""`slurm-eks advise`: the layouts it picks, pinned per model and partition; its memory arithmetic against hand
computations; each of its refusals; and the render command it prints, rendered for real."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner, Result

from components import catalog
from components.config.stackfile import STACKS_DIR, load_stack
from jobs.training.presets import PRESETS
from scripts.advise.advisor import Advice, advise, global_batch_sequences, regime_for
from scripts.advise.hardware import PEAK_BF16_FLOPS, Partition, partition_hardware
from scripts.advise.memory import GIB, HOST_RUNTIME_GIB, Layout, host_memory_gib, memory
from scripts.advise.models import AdviseError, custom_model, preset_model, requested_model
from scripts.cli.main import app
from tests.config.helpers import own_storage, raw_config

# A TorchNeuron training image of the team's own registry (no public tag is pinned: jobs/render.py says why).
TORCHNEURON_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/torchneuron-training:2.14"


def _write_stack(directory: Path, name: str, partitions: dict[str, dict[str, Any]]) -> Path:
    """The prod stack with partitions changed (these keys of them) or added, as a stack file."""
    raw = raw_config("prod")
    for partition, keys in partitions.items():
        raw["partitions"][partition] = {**raw["partitions"].get(partition, {}), **keys}
    directory.mkdir(parents=True, exist_ok=True)
    raw = own_storage(raw, "prod", name)  # several of these share a directory
    (directory / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    return directory


@pytest.fixture(scope="module")
def big_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Room to grow: prod's H100 partition with 32 nodes, and an A100 partition of 64 p4d nodes (40 GiB)."""
    return _write_stack(tmp_path_factory.mktemp("stacks"), "big", {
        "gpu-h100": {"maxNodes": 32},
        "gpu-a100": {"instanceTypes": ["p4d.24xlarge"], "maxNodes": 64},
        # Trainium2 with TorchNeuron: the same layouts as the GPUs (docs/trainium.md)
        "trn2": {"instanceTypes": ["trn2.48xlarge"], "maxNodes": 16, "efa": True, "image": TORCHNEURON_IMAGE},
    })


def _partition(stack: str, name: str, stacks_dir: Path = STACKS_DIR) -> Partition:
    config, _ = load_stack(stack, stacks_dir)
    return partition_hardware(config, stack, name)


def _advise(stack: str, partition: str, model: str, stacks_dir: Path = STACKS_DIR, **kwargs: Any) -> Advice:
    return advise(preset_model(model), _partition(stack, partition, stacks_dir), **kwargs)


# --- the choices, at the defaults (8192-token sequences, 4M tokens a step, 34% MFU) ----------------------------

PINS = [
    # H100, 8 x 80 GiB (prod: 8 nodes; big: 32): data parallel below 10B, replicas while they fit; TP for 70B,
    # which needs checkpointing on up to 4 nodes and not on 8 (loss parallelism: each GPU holds the logits of 1/8
    # of the vocabulary); PP for 405B, checkpointed at any node count.
    ("prod", "gpu-h100", "llama3-1b", 8192, "DDP 8", 1, False),
    ("prod", "gpu-h100", "llama3-8b", 8192, "FSDP 16", 2, False),
    ("prod", "gpu-h100", "llama3-70b", 8192, "TP 8 x FSDP 8", 8, False),
    ("big", "gpu-h100", "llama3-70b", 8192, "TP 8 x FSDP 8", 8, False),
    ("big", "gpu-h100", "llama3-405b", 8192, "TP 8 x PP 7 x FSDP 2", 14, True),
    # A100: prod's partition mixes p4d (40 GiB) and p4de (80 GiB), so 40 GiB is what a job can count on.
    ("prod", "gpu-a100", "llama3-1b", 8192, "FSDP 8", 1, False),
    ("prod", "gpu-a100", "llama3-8b", 8192, "FSDP 8", 1, True),
    ("prod", "gpu-a100", "llama3-70b", 8192, "TP 2 x FSDP 32", 8, True),
    ("big", "gpu-a100", "llama3-405b", 8192, "TP 8 x PP 2 x FSDP 16", 32, True),
    # trn2 with TorchNeuron, 64 logical NeuronCores of 24 GiB: the GPUs' layouts. At 8192 tokens even 1B checkpoints
    # its activations (the loss of a sequence alone is 12 bytes x 128256 x 8192 = 11.7 GiB without TP).
    # (trn1, data parallel only on the legacy torch-xla path: test_trn1_...)
    ("big", "trn2", "llama3-1b", 8192, "FSDP 64", 1, True),
    ("big", "trn2", "llama3-8b", 8192, "FSDP 64", 1, True),
    ("big", "trn2", "llama3-70b", 8192, "TP 4 x FSDP 32", 2, True),
    ("big", "trn2", "llama3-405b", 8192, "TP 8 x PP 3 x FSDP 32", 12, True),
]


@pytest.mark.parametrize(("stack", "partition", "model", "seq_len", "layout", "nodes", "checkpointing"), PINS,
                         ids=[f"{p[2]}-{p[0]}-{p[1]}-{p[3]}" for p in PINS])
def test_the_pinned_choices(stack: str, partition: str, model: str, seq_len: int, layout: str, nodes: int,
                            checkpointing: bool, big_dir: Path) -> None:
    advice = _advise(stack, partition, model, big_dir if stack == "big" else STACKS_DIR, seq_len=seq_len,
                     global_batch=4 * 2**20 // seq_len)
    chosen = advice.chosen.layout
    assert (chosen.describe(), chosen.nodes, chosen.activation_checkpointing) == (layout, nodes, checkpointing)
    assert advice.chosen.fits and chosen.devices == nodes * advice.partition.devices_per_node
    # The matrix: TP only from 10B, PP only above 100B.
    params = PRESETS[model].params()
    assert (chosen.tp > 1) == (params >= 10e9) and (chosen.pp > 1) == (params > 100e9)


ERRORS = [
    ("gpu-h100", "llama3-405b", "it fits on 14 nodes: raise partitions.gpu-h100.maxNodes (8) to 14 or more"),
    ("gpu-a100", "llama3-405b", "it fits on 32 nodes: raise partitions.gpu-a100.maxNodes (16) to 32 or more"),
    # trn1's 16 GiB NeuronCores hold no replica of 1B (25.3 GiB of model state): the trn2 partition that would run it.
    ("trainium", "llama3-1b", "every replica holds the whole model (25.3 GiB of state)"),
]


@pytest.mark.parametrize(("partition", "model", "fix"), ERRORS, ids=[f"{e[1]}-{e[0]}" for e in ERRORS])
def test_what_prod_cannot_train_says_what_is_missing(partition: str, model: str, fix: str) -> None:
    with pytest.raises(AdviseError, match="does not fit on up to") as caught:
        _advise("prod", partition, model)
    assert fix in str(caught.value)
    assert ("With TorchNeuron on trn2.48xlarge" in str(caught.value)) == (partition == "trainium")


def test_a_partition_of_one_node_refuses_70b_and_names_the_node_count_it_needs(tmp_path: Path) -> None:
    small = _write_stack(tmp_path, "small", {"gpu-h100": {"maxNodes": 1}})
    with pytest.raises(AdviseError) as caught:
        _advise("small", "gpu-h100", "llama3-70b", small)
    message = str(caught.value)
    assert message.startswith("llama3-70b (70.6B parameters, 10B-100B parameters: data parallelism x tensor")
    assert "does not fit on 1 node of partition gpu-h100 of stack small" in message
    # TP 8 x FSDP 1, checkpointed: 16 bytes a parameter over 8 GPUs alone is 131.5 GiB
    assert "the leanest layout, TP 8 x FSDP 1 on 1 node with activation checkpointing and micro-batch 1, needs " \
           "145.2 GiB per GPU of 80 (model state 132.7, activations 3.5, allowance 9.0), and 820 GiB of host " \
           "memory per node of 1892" in message
    assert message.endswith("it fits on 2 nodes: raise partitions.gpu-h100.maxNodes (1) to 2 or more, or use a "
                            "partition with more memory per device")
    # And the fix is right: two nodes do it.
    two = _write_stack(tmp_path, "two", {"gpu-h100": {"maxNodes": 2}})
    assert _advise("two", "gpu-h100", "llama3-70b", two).chosen.layout.nodes == 2


def test_nodes_fixes_the_node_count_and_says_where_it_would_fit(big_dir: Path) -> None:
    advice = _advise("big", "gpu-h100", "llama3-70b", big_dir, nodes=4)
    assert advice.chosen.layout.describe() == "TP 2 x FSDP 16" and advice.chosen.layout.activation_checkpointing
    assert advice.plain_nodes == 8  # without checkpointing: within the partition
    with pytest.raises(AdviseError, match=r"does not fit on 1 node of .*it fits on 2 nodes: --nodes 2$"):
        _advise("prod", "gpu-h100", "llama3-70b", nodes=1)
    with pytest.raises(AdviseError, match=r"--nodes 9 is outside partition gpu-h100's 1 to 8 \(partitions"):
        _advise("prod", "gpu-h100", "llama3-70b", nodes=9)


def test_the_other_node_counts_are_named() -> None:
    # On more nodes than it needs with checkpointing, and the fewest it needs without.
    eight = _advise("prod", "gpu-h100", "llama3-8b")
    assert eight.fewer_nodes is not None and eight.plain_nodes is None
    fewer = eight.fewer_nodes.layout
    assert (fewer.describe(), fewer.nodes, fewer.activation_checkpointing) == ("FSDP 8", 1, True)
    seventy = _advise("prod", "gpu-h100", "llama3-70b")  # TP 8 x FSDP 8 without checkpointing on 8 nodes
    assert seventy.plain_nodes is None and seventy.fewer_nodes is not None
    fewer = seventy.fewer_nodes.layout
    assert (fewer.describe(), fewer.nodes, fewer.activation_checkpointing) == ("TP 8 x FSDP 2", 2, True)
    assert _advise("prod", "gpu-h100", "llama3-1b").fewer_nodes is None


# --- memory: the formulas against hand computations ----------------------------------------------------------

def test_8b_fsdp_over_16_gpus_by_hand() -> None:
    shape = PRESETS["llama3-8b"]
    layout = Layout(nodes=2, data="FSDP", dp_shard=16, dp_replicate=1, micro_batch=1, grad_accum=32)
    got = memory(shape, layout, seq_len=8192, device_gib=80)
    params = 8_030_261_248  # 2 x 128256 x 4096 (embedding, output) + 32 layers + the final norm
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096  # q, o; k, v (8 kv heads); SwiGLU; norms
    ends = 2 * 128256 * 4096 + 4096
    assert shape.params() == params and shape.layer_params() == layer == 218_112_000 and params - 32 * layer == ends
    # fp32 weights sharded 16 ways (4 B / 16), and FSDP's unsharded bf16 copies at the start of backward: the
    # output unit (final norm and output projection; the embedding's unit is resharded after forward) plus the
    # layer computing and the one prefetched (2 B each)
    output_unit = 128256 * 4096 + 4096
    assert got.weights * GIB == params * 4 / 16 + (output_unit + 2 * layer) * 2 == 3_930_694_656
    # fp32 gradients sharded (4 B / 16), and one layer's unsharded gradients in bf16 and fp32 (2 + 4 B)
    assert got.gradients * GIB == params * 4 / 16 + layer * 6 == 3_316_237_312
    # AdamW's two fp32 moments, sharded (8 B / 16)
    assert got.optimizer * GIB == params * 8 / 16 == 4_015_130_624
    # per token: each of 32 layers keeps 16h + 8f + 4a bytes (h 4096, f 14336, a 32); the loss 4h + 12V (V 128256)
    per_layer = 16 * 4096 + 8 * 14336 + 4 * 32
    assert got.activations * GIB == 8192 * (32 * per_layer + 4 * 4096 + 12 * 128256) == 60_020_490_240
    assert got.reserve == 1 + 0.1 * 80  # CUDA context and NCCL, and 10% for fragmentation
    assert round(got.total, 2) == 75.39  # GiB: fits in 80


def test_70b_tensor_parallel_with_checkpointing_by_hand() -> None:
    shape = PRESETS["llama3-70b"]
    layout = Layout(nodes=4, data="FSDP", dp_shard=4, dp_replicate=1, tp=8, micro_batch=1, grad_accum=128,
                    activation_checkpointing=True)
    got = memory(shape, layout, seq_len=8192, device_gib=80)
    # the 80 layers' inputs (2h a token, sequence-sharded 8 ways); one layer rebuilt in its backward: the two
    # gathered norm outputs whole (4h), the rest (12h + 8f + 4a; h 8192, f 28672, a 64) split 8 ways; the loss
    # 4h + 12V / 8: loss parallelism keeps each GPU's eighth of the vocabulary's logits
    inputs = 80 * 8192 * 2 * 8192 / 8
    rebuilt = 8192 * (4 * 8192 + (12 * 8192 + 8 * 28672 + 4 * 64) / 8)
    loss = 8192 * (4 * 8192 + 12 * 128256 / 8)
    assert got.activations * GIB == inputs + rebuilt + loss
    assert got.optimizer * GIB == shape.params() * 8 / 8 / 4  # TP 8, then FSDP 4


def test_a_pipeline_keeps_as_many_micro_batches_as_it_has_stages_in_flight() -> None:
    shape = PRESETS["llama3-405b"]
    per_layer = 8192 * (4 * 16384 + (12 * 16384 + 8 * 53248 + 4 * 128) / 8)
    loss = 8192 * (4 * 16384 + 12 * 128256 / 8)

    def activations(grad_accum: int) -> float:
        layout = Layout(nodes=8, data="FSDP", dp_shard=2, dp_replicate=1, tp=8, pp=4, grad_accum=grad_accum)
        return memory(shape, layout, seq_len=8192, device_gib=80).activations * GIB

    # ceil(126 / 4) = 32 layers a stage; 1F1B's first stage holds min(pp, micro-batches) of them
    assert activations(64) == 4 * 32 * per_layer + loss
    assert activations(2) == 2 * 32 * per_layer + loss


def test_ddp_keeps_autocast_copies_and_gradient_buckets() -> None:
    shape = PRESETS["llama3-1b"]
    got = memory(shape, Layout(nodes=1, data="DDP", dp_shard=1, dp_replicate=8), seq_len=8192, device_gib=80)
    assert got.weights * GIB == shape.params() * (4 + 2) and got.gradients * GIB == shape.params() * (4 + 4)


def test_host_memory_per_node_by_hand_is_the_staged_shards_not_the_model() -> None:
    """The 70B plan the review measured: TP 2 x FSDP 16, 8 ranks a node. Built whole on every rank it needed
    4 bytes x 70.6B x 8 = 2.26 TB of host memory a node (a p5.48xlarge has 2 TiB); built on the meta device, a
    node's ranks hold their runtimes and the checkpoints dcp.async_save stages: 12 bytes x 70.6B / 32 x 8."""
    shape = PRESETS["llama3-70b"]
    layout = Layout(nodes=4, data="FSDP", dp_shard=16, dp_replicate=1, tp=2)
    assert host_memory_gib(shape, layout, 8) * GIB == pytest.approx(
        8 * (HOST_RUNTIME_GIB * GIB + shape.params() * 12 / 32))
    assert 4 * shape.params() * 8 > 2 * 2**40  # what it was: more than the node has
    ddp = Layout(nodes=1, data="DDP", dp_shard=1, dp_replicate=8)  # every replica stages the whole state
    assert host_memory_gib(PRESETS["llama3-1b"], ddp, 8) * GIB == pytest.approx(
        8 * (HOST_RUNTIME_GIB * GIB + PRESETS["llama3-1b"].params() * 12))


def test_a_node_without_the_host_memory_is_refused_with_the_figure() -> None:
    """The same request on partitions whose pods had less host memory: with a twentieth, advise shards over more
    nodes until a node's staged checkpoints fit; with a hundredth (less than eight ranks' runtimes) nothing fits,
    and the refusal names what a node needs of host memory against what it has."""
    part = _partition("prod", "gpu-h100")
    assert part.host_memory_gib > 1500  # p5.48xlarge: 2 TiB less what the node keeps (components/slinky/sizing.py)
    roomy = _advise("prod", "gpu-h100", "llama3-70b").chosen
    assert roomy.host_gib < part.host_memory_gib
    scarce = dataclasses.replace(part, host_memory_gib=part.host_memory_gib / 20, max_nodes=32)
    twentieth = advise(preset_model("llama3-70b"), scarce)
    assert twentieth.chosen.host_gib <= part.host_memory_gib / 20 < roomy.host_gib
    assert twentieth.chosen.layout.nodes > roomy.layout.nodes
    with pytest.raises(AdviseError, match=r"GiB of host memory per node of 19\b"):
        advise(preset_model("llama3-70b"), dataclasses.replace(part, host_memory_gib=part.host_memory_gib / 100))


def test_device_memory_and_peak_per_worker_come_from_the_catalog(tmp_path: Path) -> None:
    # Every instance type a partition may use has an accelerator whose peak the estimate knows.
    assert {t.accelerator_model for t in catalog.CATALOG.values()} <= set(PEAK_BF16_FLOPS)
    trn1 = _partition("prod", "trainium")
    # trn1.32xlarge: 16 Trainium chips of 32 GiB and 190 TFLOPS, 32 NeuronCores: 16 GiB and 95 TFLOPS a core
    assert (trn1.devices_per_node, trn1.device_memory_gib, trn1.peak_flops) == (32, 16, 95e12)
    assert (trn1.device_word, trn1.neuron) == ("NeuronCore", True)
    assert _partition("prod", "gpu-a100").device_memory_gib == 40  # p4d's, the smaller of p4d and p4de
    stacks = _write_stack(tmp_path, "mem", {
        "a100-80": {"instanceTypes": ["p4de.24xlarge"], "maxNodes": 2},
        "trn2": {"instanceTypes": ["trn2.48xlarge"], "maxNodes": 2},
    })
    assert _partition("mem", "a100-80", stacks).device_memory_gib == 80
    trn2 = _partition("mem", "trn2", stacks)  # 16 chips of 96 GiB and 667 TFLOPS, 64 logical cores (LNC=2)
    assert (trn2.devices_per_node, trn2.device_memory_gib, trn2.peak_flops) == (64, 24, 667e12 / 4)


def test_the_matrix_bounds() -> None:
    assert [regime_for(p) for p in (9_999_999_999, 10_000_000_000, 100_000_000_000, 100_000_000_001)] == [
        "data", "data+tensor", "data+tensor", "3-D"]


def test_the_estimate_counts_recomputation_and_the_bubble(big_dir: Path) -> None:
    plain = _advise("big", "gpu-h100", "llama3-70b", big_dir)  # TP 8 x FSDP 8, no checkpointing
    flops = PRESETS["llama3-70b"].flops_per_token(8192)
    assert plain.tokens_per_s == pytest.approx(0.34 * 989e12 * 64 / flops)
    piped = _advise("big", "gpu-h100", "llama3-405b", big_dir)  # PP 7 over 256 micro-batches, checkpointed
    assert piped.effective_mfu == pytest.approx(0.34 * 6 / 8 * 256 / (256 + 6))


# --- requests that cannot be answered ---------------------------------------------------------------------------

def test_an_unknown_preset_suggests_the_nearest() -> None:
    with pytest.raises(AdviseError, match=r"no model preset 'llama3-8B'; did you mean 'llama3-8b'\? presets: "):
        preset_model("llama3-8B")


def test_an_unknown_partition_suggests_the_nearest() -> None:
    config, _ = load_stack("prod")
    with pytest.raises(AdviseError, match=r"stack prod has no partition 'gpu-h10'; did you mean 'gpu-h100'\?"):
        partition_hardware(config, "prod", "gpu-h10")


def test_a_custom_shape_is_checked_against_params() -> None:
    # Llama 2 13B: 40 layers of width 5120, SwiGLU 13824, a 32000-token vocabulary: 13.0B parameters
    llama2 = custom_model(5120, 40, 40, ffn_dim=13824, vocab=32000, params=13e9)
    assert round(llama2.params / 1e9, 2) == 13.02 and regime_for(llama2.params) == "data+tensor"
    with pytest.raises(AdviseError, match=r"--params 1.3e\+10 but the shape gives 14.00B parameters .* vocab 128256"):
        custom_model(5120, 40, 40, params=13e9)  # Llama 3's vocabulary, the default, is 4 times Llama 2's
    assert custom_model(5120, 40, 40, vocab=32000).shape.ffn_dim == 13824  # Llama's default width rule
    with pytest.raises(AdviseError, match="the shape cannot be built: dim 5000 is not divisible by n_heads 32"):
        custom_model(5000, 40, 32)
    with pytest.raises(AdviseError, match="must be positive"):
        custom_model(5120, 0, 40)


def test_a_model_is_a_preset_or_a_shape() -> None:
    assert requested_model("llama3-8b").shape == PRESETS["llama3-8b"]
    with pytest.raises(AdviseError, match="--model llama3-8b is a preset with its own shape: drop --dim --params"):
        requested_model("llama3-8b", dim=4096, params=8e9)
    with pytest.raises(AdviseError, match="or a shape: --layers --heads missing"):
        requested_model(None, dim=4096)


def test_the_global_batch_in_sequences_or_tokens() -> None:
    assert global_batch_sequences(8192, None, None) == 512  # 4M tokens
    assert global_batch_sequences(4096, 64, None) == 64 and global_batch_sequences(4096, None, 2**20) == 256
    with pytest.raises(AdviseError, match="not both"):
        global_batch_sequences(4096, 64, 2**20)
    with pytest.raises(AdviseError, match="a global batch of 1000000 tokens is not a whole number of 8192-token"):
        global_batch_sequences(8192, None, 1_000_000)


def test_a_request_out_of_range_is_refused() -> None:
    with pytest.raises(AdviseError, match="sequence length 0 and global batch 512 must be at least 1"):
        _advise("prod", "gpu-h100", "llama3-8b", seq_len=0)
    with pytest.raises(AdviseError, match=r"--mfu 1\.5 is not a fraction of the peak"):
        _advise("prod", "gpu-h100", "llama3-8b", mfu=1.5)


def test_a_global_batch_no_replica_count_divides_is_refused() -> None:
    with pytest.raises(AdviseError, match="no layout on up to 8 nodes divides the global batch of 7 sequences"):
        _advise("prod", "gpu-h100", "llama3-8b", global_batch=7)


# --- Trainium: what the entry point runs there ---------------------------------------------------------------------

def test_trn1_is_data_parallel_only_and_names_the_trn2_partition_that_would_run_the_model() -> None:
    """trn1 trains through the legacy torch-xla path (TorchNeuron does not run there): replicas only, and a model no
    replica holds gets the partition and the render command that would run it."""
    with pytest.raises(AdviseError) as caught:
        _advise("prod", "trainium", "llama3-70b", seq_len=4096, global_batch=1024)
    message = str(caught.value)
    assert "the leanest layout, DDP 32 on 1 node" in message
    assert ("With TorchNeuron on trn2.48xlarge (64 NeuronCores of 24 GiB a node) it fits on 1 node as TP 8 x FSDP 8: "
            "add a partition trainium-trn2 (instanceTypes [trn2.48xlarge], maxNodes 32") in message
    assert message.endswith("--tp 8 --activation-checkpointing")
    assert "slurm-eks job render --stack prod --partition trainium-trn2 --nodes 1" in message


def test_trn1_replicas_render_on_the_legacy_path(tmp_path: Path) -> None:
    advice = _advise("prod", "trainium", "debug", seq_len=2048, global_batch=2048)
    assert advice.chosen.layout.describe() == "DDP 32" and advice.command is not None
    assert "--fsdp" not in advice.flags  # refused on --device xla
    assert "legacy torch-xla path" in advice.notes[0] and "Neuron compiler" in advice.notes[1]
    _render(advice.command, tmp_path / "trn.sbatch")
    script = (tmp_path / "trn.sbatch").read_text()
    assert "--nproc-per-node=32" in script and "export SLURM_EKS_DEVICE=xla" in script


def test_a_shorter_sequence_that_fits_ends_the_error_with_its_command(big_dir: Path) -> None:
    with pytest.raises(AdviseError) as caught:
        _advise("big", "trn2", "llama3-405b", big_dir, seq_len=8192, global_batch=512, nodes=8)
    message = str(caught.value)  # 405B needs 12 trn2 nodes at 8192 tokens (PINS), 8 at 4096
    assert "At --seq-len 4096 (the same tokens a step) it fits on 8 nodes as TP 8 x PP 2 x FSDP 32" in message
    assert "slurm-eks job render --stack big --partition trn2 --nodes 8" in message
    assert "--seq-len 4096 --batch-size 1 --grad-accum 32" in message.rsplit("slurm-eks job render", 1)[1]


@pytest.mark.parametrize("model", sorted(PRESETS))
def test_advise_and_render_agree_for_every_preset_on_trainium(model: str, big_dir: Path, tmp_path: Path) -> None:
    """On trn2 (TorchNeuron) and trn1 (torch-xla): every advice renders, through the same fit check render applies,
    into the device the partition's runtime takes; what cannot run ends with the command that would."""
    for partition, device, procs in (("trn2", "neuron", 64), ("trainium", "xla", 32)):
        try:
            advice = advise(preset_model(model), _partition("big", partition, big_dir), seq_len=2048,
                            global_batch=2048, stacks_dir=str(big_dir))
        except AdviseError as error:
            assert "slurm-eks job render --stack big --partition" in str(error), error
            continue
        assert advice.command is not None
        script = tmp_path / f"{partition}.sbatch"
        _render(advice.command, script)  # exit 0: render's fit check (scripts/advise/entry_fit.py) agrees
        text = script.read_text()
        assert f"export SLURM_EKS_DEVICE={device}" in text and f"--nproc-per-node={procs}" in text


# --- the CLI, and the render command it prints -------------------------------------------------------------------

def _cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["advise", *args], env={"NO_COLOR": "1", "COLUMNS": "200"})


def _render(command: str, script: Path) -> None:
    """Run the printed `slurm-eks job render ...` with `-o` before its `--`."""
    words = shlex.split(command)
    assert words[:3] == ["slurm-eks", "job", "render"]
    cut = words.index("--")
    result = CliRunner().invoke(app, [*words[1:cut], "-o", str(script), *words[cut:]], env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert script.is_file()
    # and the entry point takes its flags (the layout's flags are checked against the world size at start)
    assert words[cut + 1] == "jobs/train.py"
    from jobs.training.config import parse_args  # torch (the jobs extra): here, not in the CLI's import path

    parse_args([*words[cut + 2:], "--steps", "100"])


def test_the_table_and_the_command() -> None:
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--model", "llama3-70b")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "candidate layouts on 8 nodes, GiB per GPU of 80" in out
    (row,) = [" ".join(line.split()) for line in out.splitlines() if line.endswith("chosen")]
    assert row == "TP 8 x FSDP 8 no 1 x 64 4.7 4.7 8.2 46.7 73.4 chosen"
    assert "recommended: TP 8 x FSDP 8 on 8 nodes (64 GPUs), micro-batch 1 x 64 accumulation steps per replica, " \
           "no activation checkpointing" in out
    assert "estimate: 44,700 tokens/s at the assumed 34% MFU, 989 TFLOPS bf16 peak per GPU" in out
    assert "fewer nodes: TP 8 x FSDP 2 on 2 nodes with activation checkpointing (--nodes 2)" in out
    # 512 sequences x 8192 tokens a step at 44,700 tokens/s: 93.8 s, so --step-seconds 94.
    assert "render it (a checkpoint is 847 GB, a step about 94 s):" in out
    assert ("slurm-eks job render --stack prod --partition gpu-h100 --nodes 8 --checkpoint-gb 847 --step-seconds 94 "
            "-- jobs/train.py --model llama3-70b --seq-len 8192 --batch-size 1 --grad-accum 64 --fsdp --tp 8\n") in out


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b"])
def test_the_printed_command_renders(model: str, tmp_path: Path) -> None:
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--model", model, "--json")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    _render(answer["recommended"]["command"], tmp_path / "job.sbatch")
    script = (tmp_path / "job.sbatch").read_text()
    assert f"jobs/train.py {' '.join(answer['recommended']['train_flags'])} || rc=$?" in script
    assert f"#SBATCH --nodes={answer['recommended']['layout']['nodes']}" in script


def test_a_stack_outside_stacks_renders_with_its_directory(big_dir: Path, tmp_path: Path) -> None:
    result = _cli("--stack", "big", "--stacks-dir", str(big_dir), "--partition", "gpu-h100", "--model",
                  "llama3-405b", "--json")
    assert result.exit_code == 0, result.output
    command = json.loads(result.stdout)["recommended"]["command"]
    assert f"--stacks-dir {big_dir} --" in command
    assert command.endswith("--fsdp --tp 8 --pp 7 --activation-checkpointing")
    _render(command, tmp_path / "405b.sbatch")


def test_a_custom_model_renders_with_its_shape(tmp_path: Path) -> None:
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--params", "13e9", "--dim", "5120", "--layers",
                  "40", "--heads", "40", "--ffn-dim", "13824", "--vocab", "32000", "--seq-len", "4096", "--json")
    assert result.exit_code == 0, result.output
    recommended = json.loads(result.stdout)["recommended"]
    assert recommended["train_flags"][:12] == ["--d-model", "5120", "--n-layers", "40", "--n-heads", "40",
                                               "--n-kv-heads", "40", "--ffn-dim", "13824", "--vocab-size", "32000"]
    assert recommended["layout"]["tp"] > 1
    _render(recommended["command"], tmp_path / "custom.sbatch")


@pytest.mark.parametrize(("args", "message"), [
    (["--partition", "gpu-h100", "--model", "llama3-8B"], "error: no model preset 'llama3-8B'; did you mean"),
    (["--partition", "gpu-h10", "--model", "llama3-8b"], "error: stack prod has no partition 'gpu-h10'; did you"),
    (["--partition", "gpu-h100", "--model", "llama3-405b"], "error: llama3-405b (405.9B parameters, above 100B"),
])
def test_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = _cli("--stack", "prod", *args)
    assert result.exit_code == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1 and result.stdout == ""


def test_the_documented_example_is_what_advise_prints() -> None:
    """docs/jobs.md, "Choosing a layout": the Llama 3 70B example's output and the command rendered from it."""
    result = _cli("--stack", "prod", "--partition", "gpu-h100", "--model", "llama3-70b")
    page = (Path(__file__).resolve().parents[2] / "docs" / "jobs.md").read_text()
    for line in ("recommended: TP 8 x FSDP 8 on 8 nodes", "estimate: 44,700 tokens/s", "fewer nodes:"):
        (printed,) = [p for p in result.stdout.splitlines() if p.startswith(line)]
        assert printed in page
    command = result.stdout.splitlines()[-1].strip()
    assert f"{command} --steps 20000 > train-70b.sbatch" in page
    (row,) = [" ".join(line.split()) for line in result.stdout.splitlines() if line.endswith("chosen")]
    assert row in [" ".join(line.split()) for line in page.splitlines()]
