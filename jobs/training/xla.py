"""The torch-xla pieces of training on Trainium (torch-neuronx is a torch-xla plugin), imported only when
`--device xla` asks for them, so the entry point stays importable with plain torch.

Each piece is what AWS's Neuron training guide prescribes (aws-neuron/aws-neuron-sdk
`frameworks/torch/torch-neuronx/programming-guide/training/pytorch-neuron-programming-guide.rst`):
the XLA device per process (one NeuronCore each; torch-xla itself sets NEURON_RT_VISIBLE_CORES from
LOCAL_RANK under torchrun: `torch_xla/_internal/neuron.py` configure_pjrt_environment), the `xla` process
group, no DDP wrapper but `xm.optimizer_step`'s gradient all-reduce (split here into reduce, clip, step),
a graph cut (`mark_step`, now `torch_xla.sync`) at the end of each step, and PyTorch/XLA's `xm.save` for
checkpoints. bf16 is `torch.autocast(device_type="xla")` around the forward pass with the compiler's own
auto-cast off (`about-neuron/appnotes/torch-neuronx/migration-from-xla-downcast-bf16.rst`; the job
script sets `NEURON_CC_FLAGS=--auto-cast=none`).
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.distributed.xla_backend  # registers the "xla" backend with torch.distributed
import torch_xla.runtime as xr

# Set by neuron_parallel_compile while it extracts graphs: outputs are zeros, so the run only has to trace
# each distinct graph once (Neuron docs, torch-neuronx environment variables page).
EXTRACT_GRAPHS_ENV = "NEURON_EXTRACT_GRAPHS_ONLY"


class XlaUnsupported(RuntimeError):
    """A setup under which XLA training would run but silently compute the wrong thing."""


def extracting_graphs() -> bool:
    return os.environ.get(EXTRACT_GRAPHS_ENV, "") not in ("", "0")


def init_process_group(timeout: timedelta) -> torch.device:
    """The `xla` group (rendezvous through torchrun's env via `xla://`) and this process's XLA device."""
    if "RANK" in os.environ:
        dist.init_process_group("xla", init_method="xla://", timeout=timeout)
    else:  # plain `python train.py`: a one-process group
        dist.init_process_group("xla", store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if dist.get_world_size() != launched:
        # Measured with torch-xla 2.9.0 on PJRT_DEVICE=CPU: each process's client knows only its own device,
        # so every torchrun worker forms a world of one and would train its own model, unreduced.
        raise XlaUnsupported(
            f"torchrun started {launched} workers but the XLA runtime sees {dist.get_world_size()} replica(s) "
            f"on {xr.device_type()}: it cannot reduce across these processes (torch-xla's CPU client never "
            "can); run one worker, or run on Neuron devices"
        )
    return torch_xla.device()


def device_kind() -> str:
    """PJRT's device type: NEURON on Trainium, CPU in the tests here."""
    return str(xr.device_type())


def reduce_gradients(optimizer: torch.optim.Optimizer) -> None:
    """Average gradients over all replicas (the first half of `xm.optimizer_step`)."""
    xm.reduce_gradients(optimizer)


def sync() -> None:
    """Cut the lazy graph here and launch it (one compiled graph per training step)."""
    torch_xla.sync()


def save(state: dict[str, object], path: str) -> None:
    """Write `state` from the global master only, after moving it to the host (`xm.save`); with
    `global_master=False` every node's local master would write the same file on the shared /shared."""
    xm.save(state, path, master_only=True, global_master=True)


def manual_seed(seed: int) -> None:
    """Seed the XLA device's generator. torch-xla also advances it at every graph cut, including cuts with
    nothing to run (checkpoints add some), so the trainer seeds it before every step from (seed, rank, step):
    a resumed run then draws the masks an uninterrupted one draws. The seed is uploaded as data, not baked
    into the graph, so this compiles nothing new."""
    xm.set_rng_state(seed % (1 << 63))
