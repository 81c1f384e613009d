"""JSON-lines logging on rank 0, throughput/MFU, and a hash of the full parameters to compare runs."""

from __future__ import annotations

import ctypes
import hashlib
import json
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.distributed.tensor import DTensor

from jobs.training.peaks import PEAK_BF16_FLOPS


def peak_bf16_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16_FLOPS.items() if key in name), None)


class JsonLog:
    """One JSON object per line on stdout, from rank 0 only."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, **fields: object) -> None:
        if self.enabled:
            sys.stdout.write(json.dumps({"time": round(time.time(), 3), **fields}) + "\n")
            sys.stdout.flush()


class Throughput:
    """Tokens/s and MFU over the steps since the previous report."""

    def __init__(self, tokens_per_step: int, flops_per_token: float, peak_flops: float | None, world: int):
        self.tokens_per_step = tokens_per_step
        self.flops_per_token = flops_per_token
        self.peak_flops = peak_flops
        self.world = world
        self._since = time.perf_counter()
        self._steps = 0

    def step(self) -> None:
        self._steps += 1

    def report(self) -> dict[str, float]:
        now = time.perf_counter()
        tokens_per_s = self._steps * self.tokens_per_step / (now - self._since)
        self._since, self._steps = now, 0
        out = {"tokens_per_s": round(tokens_per_s, 1)}
        if self.peak_flops is not None:
            out["mfu"] = round(tokens_per_s * self.flops_per_token / (self.peak_flops * self.world), 4)
        return out


def _sha256(tensor: torch.Tensor) -> str:
    tensor = tensor.detach().cpu().contiguous()
    return hashlib.sha256(ctypes.string_at(tensor.data_ptr(), tensor.numel() * tensor.element_size())).hexdigest()


def params_sha256(model: nn.Module, group: dist.ProcessGroup | None = None, *, hashes: bool = True) -> str | None:
    """SHA-256 over (name, SHA-256 of the full tensor's bytes) in name order, over the whole model's state dict
    whatever the layout, so the same weights give the same digest under DDP, FSDP2, TP or PP. Collective over
    every rank; the digest on rank 0. Sharded tensors are gathered one at a time (`full_tensor`, collective
    over their mesh); ranks with `hashes` hash what they hold (one rank per pipeline stage is enough, its
    data-parallel and tensor-parallel peers hold the same), and rank 0 merges their digests, gathered on
    `group` (gloo: small CPU objects)."""
    if next(model.parameters()).device.type == "xla":  # replicated, unwrapped: rank 0's copy is the model
        if dist.get_rank() != 0:
            return None
        digests = {name: _sha256(tensor) for name, tensor in model.state_dict().items()}
    else:
        digests = {}
        state = get_model_state_dict(model)  # the model's own names, without DDP's or compile's prefixes
        for name in sorted(state):  # the same order on every rank of a stage: full_tensor is collective
            value = state[name]
            full = value.full_tensor() if isinstance(value, DTensor) else value
            if hashes:
                digests[name] = _sha256(full)
        world, main = dist.get_world_size(group), dist.get_rank() == 0
        gathered: list[dict[str, str]] | None = [{} for _ in range(world)] if main else None
        dist.gather_object(digests, gathered, dst=0, group=group)
        if gathered is None:
            return None
        digests = {name: digest for part in gathered for name, digest in part.items()}
    combined = hashlib.sha256()
    for name in sorted(digests):
        combined.update(name.encode())
        combined.update(bytes.fromhex(digests[name]))
    return combined.hexdigest()
