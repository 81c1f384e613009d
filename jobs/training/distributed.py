"""Process group setup from torchrun's environment (or a one-process group without torchrun), per device
kind: CUDA (NCCL, with gloo for CPU tensors), Neuron (Trainium2/3 through TorchNeuron, jobs/training/neuron.py),
XLA (trn1 through the legacy torch-xla, jobs/training/xla.py) or the CPU (gloo)."""

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
    # gloo group for small CPU-side agreements (stop requests, async checkpoint planning): a CPU tensor on
    # it never waits for the accelerator's queue. None: the default group has a CPU backend already.
    cpu_group: dist.ProcessGroup | None = None
    # The runtime the trainer was asked for: "cuda", "neuron", "xla" or "cpu". Usually the device's type; not
    # with a stand-in (tests/standins/torch_neuronx), whose Neuron backend serves CPU tensors: the choices
    # below key on the kind, so the stand-in runs the Neuron code path.
    kind: str = "cpu"

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_xla(self) -> bool:
        return self.kind == "xla"

    @property
    def accelerated(self) -> bool:
        """On an accelerator that computes in bf16 (CUDA, Neuron), not the CPU."""
        return self.kind in ("cuda", "neuron")


def resolve_kind(kind: str) -> str:
    if kind == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return kind


def init_distributed(kind: str = "auto", timeout: timedelta = timedelta(minutes=10)) -> DistEnv:
    """NCCL for CUDA tensors (gloo alongside for CPU ones, which DCP's planning uses), the `neuron` backend for
    Neuron tensors (gloo alongside), the `xla` group on XLA devices, gloo on the CPU."""
    kind = resolve_kind(kind)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if kind == "xla":
        from jobs.training import xla  # torch_xla is only in the Neuron image

        device = xla.init_process_group(timeout)
        # The xla backend reduces XLA tensors only; stop requests and the like travel on gloo.
        return DistEnv(dist.get_rank(), local_rank, dist.get_world_size(), device, dist.new_group(backend="gloo"),
                       "xla")
    cpu_group = None
    if kind == "neuron":
        from jobs.training import neuron  # torch_neuronx is only in the TorchNeuron image

        # The device is not touched before the group exists: the backend binds this process to its NeuronCore
        # when the group starts (jobs/training/neuron.py).
        device_type = neuron.device_type()
        backend = neuron.process_group_backend(device_type)
    elif kind == "cuda":
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
    if kind == "neuron":
        device = torch.device(device_type)  # this process's NeuronCore: each process sees only its own
        # Stop requests and the like on gloo, as on XLA: whatever the neuron backend does with CPU tensors.
        cpu_group = dist.new_group(backend="gloo")
    return DistEnv(dist.get_rank(), local_rank, dist.get_world_size(), device, cpu_group, kind)


def all_ranks_max(values: list[int], env: DistEnv) -> list[int]:
    """Element-wise max over ranks (so every rank takes the same decision at the same step). A CPU tensor:
    no wait for the accelerator's queue, so calling it does not stall the steps in flight."""
    if not dist.is_initialized():  # one process and no group: jobs/recipes/hf_finetune.py run without torchrun
        return values
    tensor = torch.tensor(values, dtype=torch.int64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=env.cpu_group)
    return tensor.tolist()
