"""AdamW (fused on CUDA; no weight decay on biases and norms) with a linear-warmup + cosine schedule."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR


def build_optimizer(model: nn.Module, lr: float, weight_decay: float, device: torch.device) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=device.type == "cuda")


def lr_multiplier(step: int, warmup_steps: int, total_steps: int, min_ratio: float) -> float:
    """Factor on the peak lr for the update after `step` completed steps: linear warmup from 1/warmup,
    then cosine decay to `min_ratio` at `total_steps`."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int, min_ratio: float
) -> LambdaLR:
    # A closure, not a callable object: LambdaLR then checkpoints only its counters, so a run resumed
    # with a longer --steps follows the new schedule rather than the saved one.
    def factor(step: int) -> float:
        return lr_multiplier(step, warmup_steps, total_steps, min_ratio)

    return LambdaLR(optimizer, factor)
