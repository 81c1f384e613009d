"""JSON-lines logging on rank 0, throughput/MFU, and a hash of the full parameters to compare runs."""

from __future__ import annotations

import ctypes
import hashlib
import json
import sys
import time

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

# Dense bf16 tensor-core peaks (no sparsity), matched against torch.cuda.get_device_name().
_PEAK_BF16_FLOPS = {"A100": 312e12, "H100": 989e12, "H200": 989e12, "A10G": 125e12}


def peak_bf16_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in _PEAK_BF16_FLOPS.items() if key in name), None)


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


def params_sha256(model: nn.Module) -> str | None:
    """SHA-256 over (name, full unsharded fp32 bytes) in name order; collective, the digest on rank 0."""
    if next(model.parameters()).device.type == "xla":  # replicated, unwrapped: rank 0's copy is the model
        if torch.distributed.get_rank() != 0:
            return None
        full = {name: tensor.cpu() for name, tensor in model.state_dict().items()}
    else:
        full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if not full:  # non-zero ranks receive nothing with cpu_offload
        return None
    digest = hashlib.sha256()
    for name in sorted(full):
        tensor = full[name].detach().cpu().contiguous()
        digest.update(name.encode())
        digest.update(ctypes.string_at(tensor.data_ptr(), tensor.numel() * tensor.element_size()))
    return digest.hexdigest()
