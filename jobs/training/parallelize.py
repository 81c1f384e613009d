"""Apply activation checkpointing, torch.compile and data parallelism (DDP or FSDP2) to the model."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

from jobs.training.distributed import DistEnv
from jobs.training.model import GPT


def parallelize(
    model: GPT, env: DistEnv, *, fsdp: bool, activation_checkpointing: bool, compile_blocks: bool
) -> nn.Module:
    """Return the module to train; parameter names stay those of `model` (no wrapper prefixes in DCP). On XLA
    the bare module: replicas average their gradients through xm (Neuron's guide: remove the DDP wrapper)."""
    model.activation_checkpointing = activation_checkpointing
    if env.is_xla:
        return model.to(env.device)
    if compile_blocks:
        for block in model.blocks:
            block.compile()  # in place, per block (as torchtitan does): names unchanged, small graphs
    if fsdp:
        mesh = init_device_mesh(env.device.type, (env.world_size,))
        # bf16 compute with fp32 gradient reduction on GPU; full fp32 on CPU (no fast bf16 matmuls there).
        mp = (
            MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            if env.device.type == "cuda"
            else MixedPrecisionPolicy()
        )
        for block in model.blocks:
            fully_shard(block, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        return model
    model.to(env.device)
    return DistributedDataParallel(model, device_ids=[env.local_rank] if env.device.type == "cuda" else None)


def autocast_context(model: nn.Module, device: torch.device) -> Callable[[], AbstractContextManager[object]]:
    """bf16 autocast for DDP on GPU and on XLA (Neuron's migration guide: autocast with device_type "xla",
    fp32 master weights); FSDP2 already computes in bf16 through its MixedPrecisionPolicy."""
    if device.type == "cuda" and isinstance(model, DistributedDataParallel):
        return lambda: torch.autocast("cuda", dtype=torch.bfloat16)
    if device.type == "xla":
        return lambda: torch.autocast("xla", dtype=torch.bfloat16)
    return contextlib.nullcontext


def grad_sync_context(model: nn.Module, sync: bool) -> AbstractContextManager[object]:
    """Skip DDP's all-reduce on all but the last micro-step; FSDP2 reduce-scatters every micro-step so
    gradients stay sharded (the memory FSDP is used for)."""
    if not sync and isinstance(model, DistributedDataParallel):
        return model.no_sync()
    return contextlib.nullcontext()
