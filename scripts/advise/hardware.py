"""A partition's devices as the advice sees them: how many per node, their memory and speed, how many nodes."""

from __future__ import annotations

from dataclasses import dataclass

from components import catalog
from components.config.cluster import ClusterConfig
from components.config.problems import did_you_mean
from components.slinky.sizing import slurmd_resources
from jobs.training.peaks import PEAK_BF16_FLOPS
from scripts.advise.models import AdviseError


@dataclass(frozen=True)
class Partition:
    stack: str
    name: str
    instance_types: tuple[str, ...]
    accelerator: str  # the catalog's accelerator_model: "H100", "Trainium", ...
    neuron: bool
    devices_per_node: int  # GPUs, or NeuronCores on Trainium: one torchrun worker each
    device_memory_gib: float  # per device, the smallest of the partition's instance types
    peak_flops: float  # dense bf16 per device
    max_nodes: int
    # What Slurm lets a job use on one node: the slurmd pod's memory (components/slinky/sizing.py), GiB.
    host_memory_gib: float = 0.0

    @property
    def device_word(self) -> str:
        return "NeuronCore" if self.neuron else "GPU"


def partition_hardware(config: ClusterConfig, stack: str, name: str) -> Partition:
    """The partition's per-device facts from the catalog. A partition mixes instance types of one accelerator
    kind and count (the partition-accelerators rule) but not always one memory size (p4d's A100s have 40 GiB,
    p4de's 80): Karpenter may launch either, so the smaller is what a job can count on."""
    if name not in config.partitions:
        hint = did_you_mean(name, config.partitions)
        raise AdviseError(f"stack {stack} has no partition {name!r}; {hint}partitions: {', '.join(config.partitions)}")
    partition = config.partitions[name]
    types = [catalog.lookup(t) for t in partition.instance_types]
    first = types[0]  # every catalog type has an accelerator with a peak (tests/advise pins it)
    if first.accelerator == "neuron":
        # A Trainium worker is one (logical) NeuronCore: its share of its chip's memory and compute. trn1: 16
        # chips of 32 GiB, 32 cores, so 16 GiB a core ("32 GiB of device memory" per chip, trainium.rst);
        # trn2: 16 chips of 96 GiB, 64 logical cores (LNC=2), so 24 GiB.
        devices = first.neuron_cores
        memory = min(t.accelerators * t.accelerator_memory_gib / t.neuron_cores for t in types)
    else:
        devices = first.accelerators
        memory = min(t.accelerator_memory_gib for t in types)
    return Partition(
        stack=stack,
        name=name,
        instance_types=tuple(partition.instance_types),
        accelerator=first.accelerator_model,
        neuron=first.accelerator == "neuron",
        devices_per_node=devices,
        device_memory_gib=memory,
        peak_flops=PEAK_BF16_FLOPS[first.accelerator_model] * first.accelerators / devices,
        max_nodes=partition.max_nodes,
        host_memory_gib=slurmd_resources(partition).memory_mib / 1024,
    )
