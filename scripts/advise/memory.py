"""Memory per device of one training layout: model state, activations and an allowance, in GiB.

Counted for the entry point as it trains (jobs/train.py: AdamW, fp32 master weights, bf16 compute, SDPA
attention, Llama layers from jobs/training/model.py), on the busiest device: the first pipeline stage's
activations with the heaviest stage's parameters and the loss of the last, at the start of backward,
when every activation of the step is still held.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from jobs.training.presets import ModelShape

GIB = 2**30

# --- model state, bytes per parameter -----------------------------------------------------------------
# Parameters stay fp32 and compute runs in bf16 (jobs/training/parallelize.py): FSDP2 all-gathers them cast to
# MixedPrecisionPolicy(param_dtype=bfloat16) and reduce-scatters gradients in reduce_dtype=float32, then keeps
# the sharded gradient in the parameter's dtype; DDP runs under torch.autocast(bfloat16). What stays resident:
MASTER_WEIGHT_BYTES = 4  # the parameter itself, fp32
GRADIENT_BYTES = 4  # its .grad, in the parameter's dtype
ADAMW_BYTES = 8  # exp_avg and exp_avg_sq, fp32 like the parameter (torch.optim.AdamW: torch.zeros_like(p))
# 16 bytes in all, the ZeRO paper's mixed-precision Adam total (Rajbhandari et al. 2020, "ZeRO: Memory
# Optimizations Toward Training Trillion Parameter Models", section 3.1: 2 + 2 + 12 bytes), held here as
# 4 + 4 + 8 because the master weights are the parameters. Sharded over the FSDP group; whole under DDP.
BF16_BYTES = 2  # the compute copies, and every activation
# DistributedDataParallel's gradient buckets: a second copy of the gradients unless gradient_as_bucket_view=True
# ("the saved memory size will be equal to the total gradients size", torch DDP docs), which is not set.
DDP_BUCKET_BYTES = 4
# A distributed checkpoint holds the fp32 model and AdamW's two moments (jobs/training/checkpoint.py saves the
# model and optimizer state dicts), not the gradients.
CHECKPOINT_BYTES = MASTER_WEIGHT_BYTES + ADAMW_BYTES

# --- activations, bytes per token of a micro-batch ---------------------------------------------------------
# Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", section 4.1) count
# the tensors autograd keeps for backward: sbh(34 + 5as/h) for a GPT-3 layer (4h GELU MLP, dropout masks, the
# a x s x s attention scores stored). Counted the same way for the entry point's Llama layer, with no dropout
# and SDPA's flash/memory-efficient kernels, which store no s x s scores (they recompute them in backward), the
# layer keeps, per token:
LAYER_WIDTH_H = 16  # 8 bf16 tensors of width h: attention_norm's input and output (wq/wk/wv's input), q and k
#   after RoPE, v (k and v repeated to every head before SDPA, so h wide), SDPA's output (wo's input: the flash
#   output is laid out (b, s, heads, d), so the reshape is a view), ffn_norm's input and output. The norms are
#   counted as the fused RMSNorm kernel keeps them (its bf16 input and an fp32 rstd); torch's composite path,
#   the CPU's, keeps fp32 copies instead, 6h more a norm (seen with saved-tensor hooks on the CPU)
LAYER_WIDTH_F = 8  # 4 bf16 tensors of the SwiGLU width: w1's output, silu's output, w3's output, their product
LAYER_PER_HEAD = 4  # SDPA's fp32 log-sum-exp, one per head
# Tensor parallelism with sequence parallelism (jobs/training/tensor_parallel.py, torchtitan's plan) divides the
# rest by t (Korthikanti Table 2, "tensor + sequence parallel"), but not the two norms' outputs: they are
# all-gathered over the sequence before the column-parallel projections, which keep the gathered tensor for
# backward, where Megatron keeps the shard and gathers again (Korthikanti section 4.2.2).
LAYER_GATHERED_H = 4
# Outside the layers, at the start of backward: the final norm's input and output (2 x 2h) and the loss in
# fp32: the log-softmax cross_entropy keeps (4V), and as backward starts its gradient and the logits' (4V + 4V).
# The vocabulary part is divided by tensor parallelism: with loss parallelism (jobs/training/tensor_parallel.py,
# torchtitan's default) each rank holds the logits of its V / t of the vocabulary, for the whole sequence.
HEAD_WIDTH_H = 4
HEAD_WIDTH_V = 12
# Full activation checkpointing (torch.utils.checkpoint per layer, jobs/training/model.py) keeps each layer's
# input, 2h per token (sequence-sharded under tensor parallelism), and rebuilds one layer's set during its
# backward (Korthikanti Table 2, "full recompute": 2sbhL). With --ac-every N only every N-th layer is recomputed
# (torchtitan's layer-level selective checkpointing); the others keep their whole set.
# tests/advise/test_memory_measured.py holds these widths to the tensors autograd saves for a real layer.
CHECKPOINTED_WIDTH_H = 2

# --- what the runtime keeps ---------------------------------------------------------------------------------
# An allowance, not a measurement: the CUDA context, cuBLAS workspaces and NCCL's buffers (about 1 GiB a GPU),
# and the caching allocator's fragmentation between what it reserves and what tensors use (10% of the device).
# Applied as is to NeuronCores, whose runtime and compiler plan memory differently.
RUNTIME_GIB = 1.0
FRAGMENTATION = 0.10

DataParallel = Literal["DDP", "FSDP", "HSDP"]


@dataclass(frozen=True)
class Layout:
    """How the devices of `nodes` nodes split the model: tp x pp x dp_shard x dp_replicate of them."""

    nodes: int
    data: DataParallel  # DDP: replicate; FSDP: shard over every replica; HSDP: shard inside a node, replicate across
    dp_shard: int
    dp_replicate: int
    tp: int = 1
    pp: int = 1
    micro_batch: int = 1  # sequences per data-parallel replica per micro-step
    grad_accum: int = 1  # micro-steps per optimizer step; with pp > 1, the pipeline's micro-batches
    activation_checkpointing: bool = False
    ac_every: int = 1  # with checkpointing, every N-th layer (jobs/train.py --ac-every; 1: every layer)

    @property
    def dp(self) -> int:
        return self.dp_shard * self.dp_replicate

    @property
    def devices(self) -> int:
        return self.tp * self.pp * self.dp

    def describe(self) -> str:
        """e.g. `TP 8 x PP 2 x FSDP 8`, `HSDP 8x2` (8-way shard inside a node, 2 replicas), `DDP 16`."""
        parts = [f"TP {self.tp}"] if self.tp > 1 else []
        parts += [f"PP {self.pp}"] if self.pp > 1 else []
        if self.data == "HSDP":
            parts.append(f"HSDP {self.dp_shard}x{self.dp_replicate}")
        else:
            parts.append(f"{self.data} {self.dp}")
        return " x ".join(parts)


@dataclass(frozen=True)
class Memory:
    """GiB per device."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    reserve: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.reserve


def stage_params(shape: ModelShape, pp: int) -> tuple[int, int]:
    """(parameters of the heaviest pipeline stage, of them those outside the layers). One stage holds every
    layer and both ends; a pipeline's first stage holds the embedding and its last the output projection
    and final norm, each with up to ceil(L / pp) layers: bounded by the larger end with the most layers."""
    if pp == 1:
        ends = shape.params() - shape.n_layers * shape.layer_params()
    else:
        ends = shape.vocab_size * shape.dim + shape.dim  # a tied embedding is held by both end stages
    return math.ceil(shape.n_layers / pp) * shape.layer_params() + ends, ends


def layer_activation_bytes(shape: ModelShape, tokens: int, tp: int = 1) -> float:
    """What one layer keeps for backward for `tokens` tokens (micro-batch x sequence length), per TP rank."""
    split = (LAYER_WIDTH_H - LAYER_GATHERED_H) * shape.dim + LAYER_WIDTH_F * shape.ffn_dim \
        + LAYER_PER_HEAD * shape.n_heads
    return tokens * (LAYER_GATHERED_H * shape.dim + split / tp)


def memory(shape: ModelShape, layout: Layout, seq_len: int, device_gib: float) -> Memory:
    t = layout.tp
    params, ends = stage_params(shape, layout.pp)
    local = params / t  # tensor parallelism splits every matrix of the stage; the norms are counted split too
    shard = 1 if layout.data == "DDP" else layout.dp_shard
    weights = local * MASTER_WEIGHT_BYTES / shard
    gradients = local * GRADIENT_BYTES / shard
    optimizer = local * ADAMW_BYTES / shard
    if layout.data == "DDP":
        weights += local * BF16_BYTES  # autocast's bf16 copies, kept by autograd from forward to backward
        gradients += local * DDP_BUCKET_BYTES
    else:
        # FSDP2 gathers each unit unsharded in bf16 while it computes and prefetches the next layer; a layer's
        # unsharded gradients wait in bf16 and fp32 (reduce_dtype) for their reduce-scatter. The units are
        # torchtitan's (jobs/training/parallelize.py): the embedding, each layer, the final norm with the output;
        # at the start of backward the last is gathered and the embedding is not. Under a pipeline nothing is
        # resharded after forward, and a tied embedding stays in the root unit: both ends stay gathered.
        block = shape.layer_params() / t
        held_ends = ends
        if layout.pp == 1 and not shape.tie_embeddings:
            held_ends = shape.vocab_size * shape.dim + shape.dim  # the output projection and the final norm
        weights += (held_ends / t + 2 * block) * BF16_BYTES
        gradients += block * (BF16_BYTES + GRADIENT_BYTES)
    tokens = layout.micro_batch * seq_len
    layers = math.ceil(shape.n_layers / layout.pp)
    # 1F1B holds up to pp micro-batches in flight on the first stage (Narayanan et al. 2021, "Efficient
    # Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", section 2.2.1).
    in_flight = min(layout.pp, layout.grad_accum)
    layer = layer_activation_bytes(shape, tokens, t)
    if layout.activation_checkpointing:
        # every ac_every-th layer keeps its input only (the heaviest stage: the fewest of its layers recomputed)
        recomputed = layers // layout.ac_every
        kept = in_flight * (recomputed * tokens * CHECKPOINTED_WIDTH_H * shape.dim / t
                            + (layers - recomputed) * layer) + layer
    else:
        kept = in_flight * layers * layer
    head = tokens * (HEAD_WIDTH_H * shape.dim + HEAD_WIDTH_V * shape.vocab_size / t)
    return Memory(
        weights=weights / GIB,
        gradients=gradients / GIB,
        optimizer=optimizer / GIB,
        activations=(kept + head) / GIB,
        reserve=RUNTIME_GIB + FRAGMENTATION * device_gib,
    )


# --- host memory per node ----------------------------------------------------------------------------------------
# The entry point builds the model on the meta device and each rank allocates only its shards, on its device
# (jobs/training/materialize.py; benchmarks/bench_startup.py measures it), so parameters cost host memory only
# where a checkpoint is staged: dcp.async_save copies the rank's state dict (its fp32 weights and AdamW moments)
# to host memory before writing it (jobs/training/checkpoint.py). Before that change every rank built the whole
# model in host memory first: 4 bytes x parameters x ranks per node.
# An allowance per rank, not a measurement: the interpreter with torch and its CUDA host side, NCCL's host
# buffers and the data loader (a torch process with gloo alone holds 0.27 GiB here).
HOST_RUNTIME_GIB = 4.0


def host_memory_gib(shape: ModelShape, layout: Layout, ranks_per_node: int) -> float:
    """Host memory one node's ranks need at once: each rank's runtime and its staged checkpoint."""
    params, _ = stage_params(shape, layout.pp)
    shard = 1 if layout.data == "DDP" else layout.dp_shard
    staged = params / layout.tp / shard * CHECKPOINT_BYTES
    return ranks_per_node * (HOST_RUNTIME_GIB + staged / GIB)
