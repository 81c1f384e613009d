"""A CPU stand-in for TorchNeuron's registrations (tests/standins/README.md): the `neuron` process-group backend
and the `neuron` torch.compile backend, both on the CPU. Real TorchNeuron registers the backend for its `neuron`
device; this one registers it for CPU tensors, which is how jobs/training/neuron.py learns where to train."""

from __future__ import annotations

import atexit
import os
import sys
from datetime import timedelta

import torch.distributed as dist
from torch._dynamo.backends.registry import lookup_backend, register_backend

calls = {"process_groups": 0, "compiled_graphs": 0}


def _process_group(store: dist.Store, rank: int, size: int, timeout: timedelta) -> dist.ProcessGroup:
    calls["process_groups"] += 1
    return dist.ProcessGroupGloo(store, rank, size, timeout)


def _compile(graph, example_inputs):
    calls["compiled_graphs"] += 1
    return lookup_backend("aot_eager")(graph, example_inputs)


if "neuron" not in dist.Backend.backend_list:
    dist.Backend.register_backend("neuron", _process_group, devices=["cpu"])
    register_backend(compiler_fn=_compile, name="neuron")


if os.environ.get("SLURM_EKS_STANDIN_REPORT"):  # what the process asked of the stand-in, for the tests
    atexit.register(lambda: print(f"torch_neuronx stand-in: {calls}", file=sys.stderr))
