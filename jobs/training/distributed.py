"""Process group setup from torchrun's environment (or a one-process group without torchrun)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistEnv:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(timeout: timedelta = timedelta(minutes=10)) -> DistEnv:
    """NCCL for CUDA tensors (gloo alongside for CPU ones, which DCP's planning uses), gloo on CPU."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "cpu:gloo,cuda:nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if "RANK" in os.environ:  # launched by torchrun (or srun with the env set): rendezvous via env://
        store, rank, world_size = next(dist.rendezvous("env://", timeout=timeout))
        # torchrun keeps one TCPStore across worker restarts (--max-restarts) and workers write their
        # gloo/NCCL bootstrap keys to it unprefixed: a restarted worker can read the previous attempt's
        # address and fail with "Connection refused" (measured with torch 2.13). Namespace per attempt.
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        store = dist.PrefixStore(f"attempt-{attempt}", store)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    else:  # plain `python train.py`: a one-rank group keeps every code path the same
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    return DistEnv(dist.get_rank(), local_rank, dist.get_world_size(), device)


def all_ranks_max(values: list[int], device: torch.device) -> list[int]:
    """Element-wise max over ranks (used so every rank takes the same decision at the same step)."""
    tensor = torch.tensor(values, dtype=torch.int64, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.tolist()
