"""Apply the layout of the device mesh to the model: pipeline split, tensor parallelism, activation
checkpointing, torch.compile, then data parallelism (DDP, or FSDP2 over dp_shard / HSDP), in torchtitan's order
(pytorch/torchtitan `torchtitan/models/llama3/infra/parallelize.py` parallelize_llama, and
`torchtitan/distributed/pipeline_parallel.py` pipeline_llm, which splits before the rest)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel

from jobs.training.distributed import DistEnv
from jobs.training.materialize import WholeValue, is_meta, materialize
from jobs.training.mesh import ParallelDims, coordinate, submesh
from jobs.training.model import Transformer
from jobs.training.neuron import COMPILE_BACKEND as NEURON_COMPILE_BACKEND
from jobs.training.pipeline import Pipeline, build_pipeline, split_stage
from jobs.training.tensor_parallel import apply_tp, loss_context

# torch.compile's backend per device kind (default: Inductor).
COMPILE_BACKENDS = {"neuron": NEURON_COMPILE_BACKEND}


@dataclass(frozen=True)
class Parallelized:
    model: nn.Module  # what this rank trains: the whole model or its pipeline stage, DDP-wrapped or fully_shard-ed
    pipeline: Pipeline | None  # runs the steps when pp > 1
    # what a micro-step's forward and backward run inside (loss_parallel under tensor parallelism; the pipeline
    # enters it itself)
    loss_context: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext


def parallelize(
    model: Transformer,
    env: DistEnv,
    dims: ParallelDims,
    mesh: DeviceMesh | None,
    *,
    activation_checkpointing: bool,
    ac_every: int = 1,
    compile_blocks: bool,
    n_microbatches: int,
    seed: int = 0,
    values: WholeValue | None = None,
) -> Parallelized:
    """Parameter names stay those of `model` (no wrapper prefixes in DCP). On XLA (no mesh) the bare module:
    replicas average their gradients through xm (Neuron's guide: remove the DDP wrapper).

    A model on the meta device (build it under `torch.device("meta")`) is laid out first and then made real,
    each rank allocating and initialising only what it holds (jobs/training/materialize.py), from `values` (released
    weights) when given; a real model is laid out as it is."""
    model.activation_checkpointing, model.ac_every = activation_checkpointing, ac_every
    deferred = is_meta(model)
    if mesh is None:
        if deferred:
            materialize(model, torch.device("cpu"), seed, values)
        return Parallelized(model.to(env.device), None)
    if dims.pp > 1:
        split_stage(model, coordinate(mesh, "pp"), dims.pp)
    stage = model  # the Transformer (or its stage) before a wrapper: whether this rank has the output projection
    if dims.tp > 1:
        apply_tp(model, mesh["tp"])
    if compile_blocks:
        for block in model.layers.values():
            # In place, per block (as torchtitan does): names unchanged, small graphs. On Neuron its own backend
            # (no Inductor there; jobs/training/neuron.py).
            block.compile(backend=COMPILE_BACKENDS.get(env.kind, "inductor"))
    if dims.fsdp:
        # bf16 compute with fp32 gradient reduction on accelerators (FSDP2's policy, as on GPUs, is what the
        # Neuron docs name for mixed precision); full fp32 on CPU (no fast bf16 matmuls there).
        mp = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if env.accelerated
            else MixedPrecisionPolicy()
        )
        # A 2-D ("dp_replicate", "dp_shard") mesh makes it HSDP. Under PP, keep the gathered weights between
        # the micro-batches (torchtitan's default reshard_after_forward policy: not pp_enabled).
        dp_mesh = submesh(mesh, "dp_replicate", "dp_shard")
        reshard = dims.pp == 1
        # torchtitan's units (torchtitan/models/llama3/infra/parallelize.py apply_fsdp): the embedding, each block,
        # and the final norm with the output projection, each gathered only while it computes, so the vocab-wide
        # matrices are not held whole through the step as the root unit's would be. The last unit is used first
        # in backward, so it stays gathered after forward. A tied embedding is one parameter in two modules:
        # it stays in the root unit.
        tied = model.cfg.shape.tie_embeddings
        if model.tok_embeddings is not None and not tied:
            fully_shard(model.tok_embeddings, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
        for block in model.layers.values():
            fully_shard(block, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
        if model.norm is not None and model.output is not None and not tied:
            fully_shard([model.norm, model.output], mesh=dp_mesh, mp_policy=mp, reshard_after_forward=False)
        fully_shard(model, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard)
        if deferred:
            materialize(model, env.device, seed, values)
    else:  # plain data parallelism (mesh.parallel_dims refuses tp/pp without --fsdp)
        if deferred:
            materialize(model, env.device, seed, values)
        model.to(env.device)
        model = DistributedDataParallel(model, device_ids=[env.local_rank] if env.device.type == "cuda" else None)
    loss = loss_context(stage, dims.tp)
    pipeline = build_pipeline(model, mesh["pp"], env.device, n_microbatches, loss) if dims.pp > 1 else None
    return Parallelized(model, pipeline, loss)


def settle_ddp_buckets(model: nn.Module, batch_size: int, seq_len: int, env: DistEnv) -> None:
    """One throwaway forward and backward of a DDP model on a micro-batch of dummy tokens (gradients dropped,
    RNG untouched), so that every training step, the first of a fresh run and the first after a resume alike,
    all-reduces its gradients in the same bucket layout. Nothing for other wrappers.

    DDP starts with its gradients in one bucket in parameter order and, before the forward that follows its
    first synchronised backward, rebuilds the buckets once in the order the gradients became ready (about
    the reverse; 1 MiB first bucket, 25 MiB after). Without this, step 1 of a run and the first step after
    every resume reduce in the first layout and every other step in the rebuilt one. Where an element sits in
    its bucket decides the order in which gloo's ring all-reduce adds the ranks' values: the same sum bit for
    bit with 2 ranks (a + b == b + a), not with 3 or more. So the step after a resume rounded differently
    from the same step uninterrupted, and the final weights differed (torch 2.13, CPU, 3, 4 and 8 ranks)."""
    if not isinstance(model, DistributedDataParallel):
        return
    device = env.device
    tokens = torch.zeros(batch_size, seq_len, dtype=torch.int64, device=device)
    # Dropout draws nothing: the generators of the CPU and of the accelerator are put back.
    accelerator = device.type if device.type != "cpu" else None
    with torch.random.fork_rng(devices=[device] if accelerator else [], device_type=accelerator or "cuda"):
        with autocast_context(model, env)():
            loss = model(tokens, tokens)
        loss.backward()  # synchronised: DDP records the ready order and rebuilds before the next forward
    model.zero_grad(set_to_none=True)


@torch.no_grad()
def clip_grad_norm_(
    parameters: Iterable[nn.Parameter], max_norm: float, pp_group: dist.ProcessGroup | None
) -> torch.Tensor:
    """Clip the gradients to a total 2-norm of `max_norm`; returns the norm before clipping, a plain tensor.
    torch's clip_grad_norm_ sees this rank's parameters only: sharded ones as DTensors (their norm reduced
    over their mesh), but not the other pipeline stages', whose squared norms are summed over `pp_group`
    (torchtitan `torchtitan/distributed/utils.py` clip_grad_norm_)."""
    params = list(parameters)
    total = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None])
    if isinstance(total, DTensor):
        total = total.full_tensor()
    if pp_group is not None:
        total = total**2
        dist.all_reduce(total, group=pp_group)
        total = total.sqrt()
    torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
    return total


def autocast_context(model: nn.Module, env: DistEnv) -> Callable[[], AbstractContextManager[object]]:
    """bf16 autocast for DDP on GPU and on Neuron (`torch.autocast(device_type="neuron")`, torch/index.html), and
    on XLA (Neuron's migration guide: autocast with device_type "xla", fp32 master weights); FSDP2 already
    computes in bf16 through its MixedPrecisionPolicy."""
    device_type = env.device.type
    if env.accelerated and isinstance(model, DistributedDataParallel):
        return lambda: torch.autocast(device_type, dtype=torch.bfloat16)
    if env.is_xla:
        return lambda: torch.autocast("xla", dtype=torch.bfloat16)
    return contextlib.nullcontext


def grad_sync_context(model: nn.Module, sync: bool) -> AbstractContextManager[object]:
    """Skip DDP's all-reduce on all but the last micro-step; FSDP2 reduce-scatters every micro-step so
    gradients stay sharded (the memory FSDP is used for)."""
    if not sync and isinstance(model, DistributedDataParallel):
        return model.no_sync()
    return contextlib.nullcontext()
