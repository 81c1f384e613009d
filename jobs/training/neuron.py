"""TorchNeuron, the native PyTorch backend for Trainium2 and Trainium3 (torch-neuronx 2.13/2.14 from Neuron 2.33),
imported only when `--device neuron` asks for it: the same trainer as on GPUs, on the `neuron` device.

What the Neuron documentation (Neuron 2.33/2.34, awsdocs-neuron.readthedocs-hosted.com) gives, and what this uses:
- `import torch_neuronx` "Registers the Neuron device and distributed backend" (torch/guides/torch-distributed.html;
  from PyTorch 2.9 the backend also autoloads through the `torch.backends` entry point). The device type is
  `neuron` (torch/index.html: "Change .to('cuda') to .to('neuron')", `torch.autocast(device_type="neuron")`).
- Collectives: `dist.init_process_group(backend="neuron", init_method="env://")` under torchrun (the same guide).
  CPU tensors (the stop agreements, DCP's planning) need gloo beside it, so the group is "cpu:gloo,neuron:neuron".
- One process per logical NeuronCore: the backend gives each process the core of its LOCAL_RANK
  (NEURON_RT_VISIBLE_CORES, unless the job set it) when the process group starts, so nothing may touch the device
  before init_process_group; each process then sees its core as the current `neuron` device.
- DDP, FSDP2 (fully_shard), DTensor tensor and sequence parallelism, pipeline parallelism and activation
  checkpointing are supported (torch/index.html, "torch.distributed works natively through the neuron backend");
  torch.compile takes `backend="neuron"` (default mode only, no Inductor; torch/index.html, and compiling needs a
  Trn2/Trn3 host). Trn1 is not supported (torch/index.html: "supported on Trainium 2 (trn2) and Trainium 3 (trn3)
  instances"): trn1 trains through the legacy torch-xla path (jobs/training/xla.py, `--device xla`).

The device is whatever device type the `neuron` process-group backend was registered for (torch.distributed keeps
the list: Backend.backend_capability), so a CPU stand-in that registers the backend for CPU tensors
(tests/standins/torch_neuronx) runs this very code path on a machine without Trainium.
"""

from __future__ import annotations

import importlib

import torch.distributed as dist

BACKEND = "neuron"  # the process-group backend torch_neuronx registers
COMPILE_BACKEND = "neuron"  # torch.compile(backend=...) (torch/index.html)
PACKAGE = "torch_neuronx"


class NeuronUnavailable(RuntimeError):
    """The Neuron device cannot be used: no torch_neuronx, or it registered no `neuron` backend."""


def device_type() -> str:
    """Import torch_neuronx (which registers the device and the `neuron` backend) and say which device type the
    backend serves: `neuron` on Trainium."""
    try:
        importlib.import_module(PACKAGE)
    except ImportError as error:
        raise NeuronUnavailable(
            f"--device neuron needs TorchNeuron (pip torch-neuronx 2.13/2.14, Neuron 2.33 or newer, on trn2/trn3): "
            f"{error}. On trn1, or an image before Neuron 2.30, use --device xla"
        ) from error
    # The devices the backend was registered for (`Backend.register_backend(..., devices=...)` records them).
    served = dist.Backend.backend_capability.get(BACKEND, [])
    if not served:
        raise NeuronUnavailable(f"{PACKAGE} registered no {BACKEND!r} process-group backend: is it TorchNeuron "
                                "(torch-neuronx 2.13 or newer) and not the torch-xla plugin of the same name?")
    return served[0]


def process_group_backend(device: str) -> str:
    """The neuron backend for the device's tensors and gloo for CPU ones (a stand-in serving the CPU takes both)."""
    return f"cpu:{BACKEND}" if device == "cpu" else f"cpu:gloo,{device}:{BACKEND}"
