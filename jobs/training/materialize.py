"""A model built on the meta device and laid out over the mesh, made real: each rank allocates its own shards
on its device and fills them from the whole model's initial values, one parameter at a time. torchtitan's
model construction (pytorch/torchtitan `torchtitan/train.py`: build under `torch.device("meta")`, parallelize,
`model.to_empty(device=...)`, `init_weights`), with one difference: torchtitan initialises each DTensor in place,
which draws the same numbers as one process only where DTensor's RNG tracker runs (CUDA-like devices); here every
parameter is drawn whole on the device from a generator of its own (Transformer.initial_value) and this rank keeps
its slice, so every layout on every device type starts from exactly the weights one process would.

Memory: a rank holds its shards, plus one whole parameter while it is drawn (the largest: the output or embedding
matrix, vocab x dim, 4.2 GB in fp32 for Llama 3 70B; on the GPU, before training allocates anything). Host
memory holds none of it on a GPU. Time: every rank draws every parameter (on an H100 a few seconds per 10^10
numbers); checkpoints and released weights are then loaded into the shards (jobs/training/checkpoint.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.distributed.tensor import DTensor, distribute_tensor

from jobs.training.model import Transformer


def is_meta(model: nn.Module) -> bool:
    return any(p.is_meta for p in model.parameters())


# A parameter's whole value by its name and size, on a device: the model's initial value, or released weights
# (jobs/training/released.py).
WholeValue = Callable[[str, tuple[int, ...], torch.device], torch.Tensor]


@torch.no_grad()
def materialize(model: Transformer, device: torch.device, seed: int, values: WholeValue | None = None) -> None:
    """Allocate `model`'s parameters (plain, or DTensors of any placement) on `device` and set each to its slice
    of its whole value: `values`, or the model's initial value for `seed`. `model` may be what split_stage,
    apply_tp and fully_shard made of the Transformer: none of them renames a parameter."""
    model.to_empty(device=device)
    for name, param in model.named_parameters():
        if values is not None:
            whole = values(name, tuple(param.shape), device)
        else:
            whole = model.initial_value(name, tuple(param.shape), device, seed)
        if isinstance(param, DTensor):
            # Every rank has the whole tensor: distribute_tensor only slices (src_data_rank=None: no broadcast).
            mine = distribute_tensor(whole, param.device_mesh, param.placements, src_data_rank=None).to_local()
            param.to_local().copy_(mine)
        else:
            param.copy_(whole)
        del whole
    model.init_buffers()
