"""Tensor parallelism with sequence parallelism (Megatron-style) for the Llama-style decoder.

The plan is torchtitan's `apply_tp` for Llama 3 before its full-DTensor rewrite (pytorch/torchtitan
`torchtitan/models/llama3/infra/parallelize.py`), with loss parallelism on as torchtitan has it by default: the
logits stay sharded over the vocabulary and the cross-entropy is computed on the shards inside
`torch.distributed.tensor.parallel.loss_parallel()` (loss_context; the backward too), so no rank holds the fp32
logits of the whole vocabulary. Styles from torch/distributed/tensor/parallel/style.py:

- between layers the residual stream is sequence-sharded: a plain tensor [B, T / tp, dim] on each rank;
- `tok_embeddings` RowwiseParallel: weight Shard(0) over the vocabulary, token ids Replicate in, the
  partial sums reduce-scattered to Shard(1) (the sequence) out;
- `attention_norm`, `ffn_norm`, `norm` SequenceParallel: replicated weights, each rank normalises its
  sequence piece;
- `attention`, `feed_forward` PrepareModuleInput: all-gather the sequence (Shard(1) -> Replicate) once per
  block; wq/wk/wv and w1/w3 ColwiseParallel (weight Shard(0): whole heads / SwiGLU columns per rank, plain
  local outputs, so attention sees n_heads / tp heads); wo and w2 RowwiseParallel (weight Shard(1)) whose
  partial sums are reduce-scattered straight back to Shard(1);
- `output` ColwiseParallel: all-gather the sequence in, logits out as a DTensor sharded over the vocabulary
  (Shard(-1), use_local_output=False), which the loss takes as it is (jobs/training/model.py).

A pipeline stage without `tok_embeddings`, `norm` or `output` gets the layer plans only: its input and output
are the sequence-sharded residual stream, which is what travels between stages.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

from jobs.training.model import Transformer


def loss_context(model: Transformer, tp: int) -> Callable[[], AbstractContextManager[object]]:
    """What the loss and its backward run inside: loss_parallel where this rank computes a vocabulary-sharded loss
    (tensor parallelism, and the output projection on this rank), else nothing. Not nestable: enter it once
    around a micro-step's forward and backward (or the pipeline schedule's step)."""
    return loss_parallel if tp > 1 and model.output is not None else nullcontext


def apply_tp(model: Transformer, tp_mesh: DeviceMesh) -> None:
    """Shard `model` (a whole model or a pipeline stage) over `tp_mesh` in place; parameter names stay."""
    ends: dict[str, ParallelStyle] = {}
    if model.tok_embeddings is not None:
        ends["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1))
    if model.norm is not None:
        ends["norm"] = SequenceParallel()
    if model.output is not None:
        ends["output"] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False)
    if ends:
        parallelize_module(model, tp_mesh, ends)
    if model.cfg.shape.tie_embeddings and model.tok_embeddings is not None and model.output is not None:
        # Both sides shard the shared [vocab, dim] weight as Shard(0), but each style registers a Parameter
        # of its own: tie them again, so one parameter gets both gradients as in the unsharded model.
        model.tok_embeddings.weight = model.output.weight
    for layer in model.layers.values():
        parallelize_module(
            layer,
            tp_mesh,
            {
                "attention_norm": SequenceParallel(),
                # forward(x, cos, sin): only x is gathered; the rope tables are plain, full-length tensors.
                "attention": PrepareModuleInput(
                    input_layouts=(Shard(1), None, None), desired_input_layouts=(Replicate(), None, None)
                ),
                "attention.wq": ColwiseParallel(),
                "attention.wk": ColwiseParallel(),
                "attention.wv": ColwiseParallel(),
                "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
                "ffn_norm": SequenceParallel(),
                "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
                "feed_forward.w1": ColwiseParallel(),
                "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
                "feed_forward.w3": ColwiseParallel(),
            },
        )
