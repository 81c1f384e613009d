"""Mixture-of-experts models, trained through torchtitan (jobs/recipes/titan.py): their presets, the memory a
layout needs per GPU, the layout to use (FSDP x expert parallelism x pipeline stages) and its job render command.

Each preset names a torchtitan 0.3.0 model family and one of its configs (`--module`, `--config`), with the
shape of the model that config builds: parameters counted on torchtitan's own model built on the meta device
(tests/recipes/test_titan.py builds each and compares). torchtitan's parallelism (torchtitan/distributed/
parallel_dims.py): expert parallelism borrows its ranks from data-parallel sharding x context x tensor
parallelism (`efsdp = dp_shard * cp * tp // ep`), so every expert's parameters are split over the same dp_shard x
tp ranks as a dense layer's: expert parallelism changes which ranks hold an expert and the all-to-all, not the
bytes per GPU. The layouts here are FSDP x EP (x PP across nodes when a stage does not fit), no tensor
parallelism, as torchtitan's MoE configs are; EP stays inside a node (its all-to-all on NVLink), at the most
experts a node's GPUs divide evenly.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from components.config.problems import did_you_mean, plural
from scripts.advise.advisor import DEFAULT_GLOBAL_BATCH_TOKENS, DEFAULT_MFU, NODE_SEARCH_LIMIT
from scripts.advise.hardware import Partition
from scripts.advise.memory import (
    ADAMW_BYTES,
    BF16_BYTES,
    CHECKPOINT_BYTES,
    CHECKPOINTED_WIDTH_H,
    FRAGMENTATION,
    GIB,
    GRADIENT_BYTES,
    HEAD_WIDTH_H,
    HEAD_WIDTH_V,
    LAYER_PER_HEAD,
    LAYER_WIDTH_F,
    LAYER_WIDTH_H,
    MASTER_WEIGHT_BYTES,
    RUNTIME_GIB,
    Memory,
)
from scripts.advise.models import AdviseError

RECIPE = "jobs/recipes/titan.py"
# Per token and routed copy, what dispatch keeps for backward: the token's hidden state sent to the expert and
# the expert's output coming back (bf16, 2 x 2h), and the router's fp32 scores over every expert.
DISPATCH_WIDTH_H = 4
ROUTER_BYTES_PER_EXPERT = 4
Checkpointing = Literal["selective", "full"]


@dataclass(frozen=True)
class MoeShape:
    """A mixture-of-experts decoder as torchtitan builds it."""

    params: int  # every parameter
    routed_params: int  # of them, the routed experts'
    layers: int
    moe_layers: int  # the others have a dense SwiGLU of width dense_ffn
    dim: int
    attention_width: int  # query heads x head width (wo's input)
    heads: int
    vocab: int
    experts: int
    top_k: int  # routed experts per token
    expert_ffn: int
    shared_ffn: int = 0  # the shared experts' SwiGLU width, 0 without
    dense_ffn: int = 0

    @property
    def active_params(self) -> int:
        """What one token computes with: every parameter but the routed experts it is not sent to."""
        return self.params - self.routed_params + self.routed_params * self.top_k // self.experts

    def flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs a token: 6 x the active parameters and the attention scores' 12 x layers x width x
        sequence (PaLM, Chowdhery et al. 2022, appendix B), the count jobs/training/presets.py uses."""
        return 6 * self.active_params + 12 * self.layers * self.attention_width * seq_len

    def ends(self) -> int:
        return 2 * self.vocab * self.dim  # the embedding and the output projection (not tied)

    def layer_params(self) -> float:
        """An average layer's parameters, experts included."""
        return (self.params - self.ends()) / self.layers


@dataclass(frozen=True)
class MoePreset:
    name: str  # advise's --model
    module: str  # torchtitan's --module
    config: str  # torchtitan's --config: a function of the module's config_registry
    flavor: str  # the model_registry flavor that config builds
    shape: MoeShape
    checkpointing: Checkpointing  # the config's activation_checkpoint
    seq_len: int  # the config's training.seq_len


# torchtitan 0.3.0: torchtitan/models/qwen3/{__init__,config_registry}.py and models/deepseek_v3/..., counted on the
# models built on the meta device (tests/recipes/test_titan.py).
MOE_PRESETS: dict[str, MoePreset] = {p.name: p for p in (
    MoePreset("qwen3-moe-debug", "qwen3", "qwen3_moe_debug", "debugmodel_moe",
              MoeShape(315_758_848, 301_989_888, layers=8, moe_layers=8, dim=256, attention_width=2048, heads=16,
                       vocab=2048, experts=64, top_k=8, expert_ffn=768), "selective", 4096),
    MoePreset("qwen3-30b-a3b", "qwen3", "qwen3_30b_a3b", "30B-A3B",
              MoeShape(30_532_122_624, 28_991_029_248, layers=48, moe_layers=48, dim=2048, attention_width=4096,
                       heads=32, vocab=151_936, experts=128, top_k=8, expert_ffn=768), "full", 4096),
    MoePreset("deepseek-v3-16b", "deepseek_v3", "deepseek_v3_16b", "16B",
              MoeShape(15_706_484_224, 14_394_851_328, layers=27, moe_layers=26, dim=2048, attention_width=2048,
                       heads=16, vocab=102_400, experts=64, top_k=6, expert_ffn=1408, shared_ffn=2816,
                       dense_ffn=10_944), "selective", 4096),
    MoePreset("deepseek-v3-671b", "deepseek_v3", "deepseek_v3_671b", "671B",
              MoeShape(671_026_404_352, 653_908_770_816, layers=61, moe_layers=58, dim=7168, attention_width=16_384,
                       heads=128, vocab=129_280, experts=256, top_k=8, expert_ffn=2048, shared_ffn=2048,
                       dense_ffn=18_432), "selective", 4096),
)}


def moe_preset(name: str) -> MoePreset:
    if name not in MOE_PRESETS:
        raise AdviseError(f"no mixture-of-experts preset {name!r}; {did_you_mean(name, MOE_PRESETS)}"
                          f"presets: {', '.join(MOE_PRESETS)}")
    return MOE_PRESETS[name]


@dataclass(frozen=True)
class MoeLayout:
    nodes: int
    dp_shard: int  # FSDP over every rank of a stage
    ep: int
    pp: int = 1
    micro_batch: int = 1  # torchtitan's training.local_batch_size
    grad_accum: int = 1
    full_checkpointing: bool = False  # torchtitan's activation-checkpoint:full instead of the config's own

    @property
    def devices(self) -> int:
        return self.dp_shard * self.pp

    def describe(self) -> str:
        parts = [f"PP {self.pp}"] if self.pp > 1 else []
        return " x ".join([*parts, f"FSDP {self.dp_shard}", f"EP {self.ep}"]) + (
            " (full activation checkpointing)" if self.full_checkpointing else "")


def moe_memory(preset: MoePreset, layout: MoeLayout, seq_len: int, device_gib: float) -> Memory:
    """GiB per GPU on the busiest stage at the start of backward, counted as memory.py counts a dense layer.

    Selective activation checkpointing (torchtitan's op-level policy) is counted as none: an upper bound."""
    shape, layers = preset.shape, math.ceil(preset.shape.layers / layout.pp)
    stage = layers * shape.layer_params() + shape.ends() / min(layout.pp, 2)
    shard = layout.dp_shard
    # FSDP gathers a layer (and prefetches the next) in bf16; an expert only among the ranks that hold it (efsdp)
    dense_part = shape.layer_params() - shape.routed_params / shape.layers
    gathered = dense_part + shape.routed_params / shape.layers / layout.ep
    weights = stage * MASTER_WEIGHT_BYTES / shard + 2 * gathered * BF16_BYTES + shape.ends() / 2 * BF16_BYTES
    gradients = stage * GRADIENT_BYTES / shard + gathered * (BF16_BYTES + GRADIENT_BYTES)
    optimizer = stage * ADAMW_BYTES / shard
    tokens = layout.micro_batch * seq_len
    ffn = shape.top_k * shape.expert_ffn + shape.shared_ffn
    per_token = (LAYER_WIDTH_H * shape.dim + LAYER_PER_HEAD * shape.heads + LAYER_WIDTH_F * ffn
                 + DISPATCH_WIDTH_H * shape.top_k * shape.dim + ROUTER_BYTES_PER_EXPERT * shape.experts)
    in_flight = min(layout.pp, layout.grad_accum)
    if preset.checkpointing == "full" or layout.full_checkpointing:
        kept = in_flight * layers * tokens * CHECKPOINTED_WIDTH_H * shape.dim + tokens * per_token
    else:
        kept = in_flight * layers * tokens * per_token
    head = tokens * (HEAD_WIDTH_H * shape.dim + HEAD_WIDTH_V * shape.vocab)
    return Memory(weights / GIB, gradients / GIB, optimizer / GIB, (kept + head) / GIB,
                  RUNTIME_GIB + FRAGMENTATION * device_gib)


@dataclass(frozen=True)
class MoeAdvice:
    preset: MoePreset
    partition: Partition
    seq_len: int
    global_batch: int
    layout: MoeLayout
    memory: Memory
    mfu: float
    tokens_per_s: float
    checkpoint_gb: int
    step_seconds: int
    command: str


def expert_degree(preset: MoePreset, partition: Partition, dp_shard: int) -> int:
    """The most ranks of one node that split the experts evenly: EP's all-to-all stays on the node's links."""
    return math.gcd(preset.shape.experts, partition.devices_per_node, dp_shard)


def advise_moe(preset: MoePreset, partition: Partition, seq_len: int | None = None, global_batch: int | None = None,
               nodes: int | None = None, mfu: float = DEFAULT_MFU, stacks_dir: str | None = None) -> MoeAdvice:
    """The fewest nodes (or `nodes`) whose FSDP x EP (x PP) layout fits, at the largest micro-batch that fits."""
    if partition.neuron:
        raise AdviseError(f"{preset.name} trains through torchtitan, which runs on NVIDIA GPUs; partition "
                          f"{partition.name} has {partition.accelerator}: use a GPU partition")
    seq_len = seq_len or preset.seq_len
    global_batch = global_batch or max(1, DEFAULT_GLOBAL_BATCH_TOKENS // seq_len)
    if nodes is not None and not 1 <= nodes <= partition.max_nodes:
        raise AdviseError(f"--nodes {nodes} is outside partition {partition.name}'s 1 to {partition.max_nodes} "
                          f"(partitions.{partition.name}.maxNodes in stack {partition.stack})")
    counts = [nodes] if nodes is not None else list(range(1, partition.max_nodes + 1))
    leanest: tuple[Memory, MoeLayout] | None = None
    for n in counts:
        for layout, mem in _layouts(preset, partition, seq_len, global_batch, n):
            if mem.total <= partition.device_memory_gib:
                return _advice(preset, partition, seq_len, global_batch, layout, mem, mfu, stacks_dir)
            if leanest is None or mem.total < leanest[0].total:
                leanest = (mem, layout)
    if leanest is None:
        raise AdviseError(f"no layout divides the global batch of {global_batch} sequences evenly over the "
                          "data-parallel ranks; give a global batch that a power of two divides")
    mem, layout = leanest
    needed = next((n for n in range(counts[-1] + 1, NODE_SEARCH_LIMIT + 1)
                   if any(m.total <= partition.device_memory_gib
                          for _, m in _layouts(preset, partition, seq_len, global_batch, n))), None)
    fix = (f"no node count up to {NODE_SEARCH_LIMIT} is enough" if needed is None else
           f"it fits on {plural(needed, 'node')}: " + (f"--nodes {needed}" if needed <= partition.max_nodes else
                                                       f"raise partitions.{partition.name}.maxNodes to {needed}"))
    on = plural(counts[-1], "node") if nodes else f"up to {plural(counts[-1], 'node')}"
    raise AdviseError(
        f"{preset.name} ({preset.shape.params / 1e9:.1f}B parameters) does not fit partition {partition.name} of "
        f"stack {partition.stack} on {on}: the leanest layout, {layout.describe()} on {plural(layout.nodes, 'node')}"
        f", needs {mem.total:.1f} GiB per GPU of {partition.device_memory_gib:g}; {fix}")


def _layouts(preset: MoePreset, partition: Partition, seq_len: int, global_batch: int,
             nodes: int) -> Iterator[tuple[MoeLayout, Memory]]:
    """Each layout on `nodes` nodes with its memory: fewest pipeline stages first, then the config's own activation
    checkpointing before full, then the largest local batch."""
    for pp in [p for p in range(1, nodes + 1) if nodes % p == 0 and p <= preset.shape.layers]:
        dp = nodes * partition.devices_per_node // pp
        per_replica, uneven = divmod(global_batch, dp)
        if uneven or per_replica < pp:  # a pipeline needs a micro-batch per stage to fill
            continue
        ep = expert_degree(preset, partition, dp)
        for full in (False, True) if preset.checkpointing != "full" else (False,):
            for b in [1] if pp > 1 else [b for b in range(per_replica, 0, -1) if per_replica % b == 0]:
                layout = MoeLayout(nodes, dp, ep, pp, b, per_replica // b, full)
                yield layout, moe_memory(preset, layout, seq_len, partition.device_memory_gib)


def _advice(preset: MoePreset, partition: Partition, seq_len: int, global_batch: int, layout: MoeLayout,
            memory: Memory, mfu: float, stacks_dir: str | None) -> MoeAdvice:
    bubble = layout.grad_accum / (layout.grad_accum + layout.pp - 1)
    tokens_per_s = mfu * bubble * partition.peak_flops * layout.devices / preset.shape.flops_per_token(seq_len)
    step_seconds = math.ceil(global_batch * seq_len / tokens_per_s)
    checkpoint_gb = math.ceil(preset.shape.params * CHECKPOINT_BYTES / 1e9)
    return MoeAdvice(preset, partition, seq_len, global_batch, layout, memory, mfu, tokens_per_s, checkpoint_gb,
                     step_seconds, render_command(preset, partition, layout, seq_len, global_batch, checkpoint_gb,
                                                  step_seconds, stacks_dir))


def titan_flags(preset: MoePreset, layout: MoeLayout, seq_len: int, global_batch: int) -> list[str]:
    """torchtitan's flags for the layout (tyro's dotted overrides of the preset's config)."""
    flags = ["--module", preset.module, "--config", preset.config,
             "--parallelism.data_parallel_shard_degree", str(layout.dp_shard),
             "--parallelism.expert_parallel_degree", str(layout.ep),
             "--parallelism.pipeline_parallel_degree", str(layout.pp),
             "--training.seq_len", str(seq_len), "--training.local_batch_size", str(layout.micro_batch),
             "--training.global_batch_size", str(global_batch)]
    # torchtitan refuses CUDA graphs with the all-to-all token dispatcher (its config check, measured: "CUDA
    # graphs support only expert parallel token dispatcher configurations without CPU synchronization").
    flags += ["--training.disable_cuda_graphs"] if layout.ep > 1 else []
    # A tyro subcommand of the config's activation_checkpoint union, after every flag (`--help` lists them).
    return [*flags, "activation-checkpoint:full"] if layout.full_checkpointing else flags


def render_command(preset: MoePreset, partition: Partition, layout: MoeLayout, seq_len: int, global_batch: int,
                   checkpoint_gb: int, step_seconds: int, stacks_dir: str | None) -> str:
    words = ["slurm-eks", "job", "render", "--stack", partition.stack, "--partition", partition.name,
             "--nodes", str(layout.nodes), "--checkpoint-gb", str(checkpoint_gb), "--step-seconds", str(step_seconds)]
    words += ["--stacks-dir", stacks_dir] if stacks_dir else []
    return shlex.join([*words, "--", RECIPE, *titan_flags(preset, layout, seq_len, global_batch)])
