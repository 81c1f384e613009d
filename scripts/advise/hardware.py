"""A partition's devices as the advice sees them: how many per node, their memory and speed, how many nodes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from components import catalog
from components.config.problems import did_you_mean
from components.slinky.sizing import slurmd_resources
from jobs.neuron_runtime import NeuronRuntime, NeuronRuntimeError, check_runtime, default_runtime
from jobs.training.peaks import PEAK_BF16_FLOPS
from scripts.advise.models import AdviseError

if TYPE_CHECKING:  # the models are read, not built, here: `slurm-eks --help` imports this module
    from components.config.cluster import ClusterConfig
    from components.config.cluster import Partition as ConfigPartition

# The Trainium2 instance advise names when a trn1 partition (data parallel only) cannot hold a model.
TRN2_ALTERNATIVE = "trn2.48xlarge"


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
    # Trainium: TorchNeuron ("native": the GPUs' layouts) or the legacy torch-xla path ("xla": data parallel only).
    neuron_runtime: NeuronRuntime | None = None
    # For a data-parallel-only partition: the same partition on TRN2_ALTERNATIVE nodes with TorchNeuron, what advise
    # names when a model cannot be replicated here.
    native_alternative: Partition | None = field(default=None, compare=False)

    @property
    def data_parallel_only(self) -> bool:
        """jobs/train.py replicates the model here: the legacy torch-xla path (jobs/training/xla.py)."""
        return self.neuron_runtime == "xla"

    @property
    def device_word(self) -> str:
        return "NeuronCore" if self.neuron else "GPU"


def partition_hardware(config: ClusterConfig, stack: str, name: str, neuron_runtime: str | None = None) -> Partition:
    """The partition's per-device facts from the catalog. A partition mixes instance types of one accelerator
    kind and count (the partition-accelerators rule) but not always one memory size (p4d's A100s have 40 GiB,
    p4de's 80): Karpenter may launch either, so the smaller is what a job can count on."""
    if name not in config.partitions:
        hint = did_you_mean(name, config.partitions)
        raise AdviseError(f"stack {stack} has no partition {name!r}; {hint}partitions: {', '.join(config.partitions)}")
    partition = config.partitions[name]
    hardware = _hardware(stack, name, partition, neuron_runtime)
    if hardware.data_parallel_only:
        native = partition.model_copy(update={"instance_types": [TRN2_ALTERNATIVE], "image": None})
        hardware = replace(hardware, native_alternative=_hardware(stack, f"{name}-trn2", native, "native"))
    return hardware


def _hardware(stack: str, name: str, partition: ConfigPartition, neuron_runtime: str | None) -> Partition:
    types = [catalog.lookup(t) for t in partition.instance_types]
    first = types[0]  # every catalog type has an accelerator with a peak (tests/advise pins it)
    runtime: NeuronRuntime | None = None
    if first.accelerator == "neuron":
        try:
            runtime = (default_runtime(first.accelerator_model, partition.image) if neuron_runtime is None
                       else check_runtime(neuron_runtime, first.accelerator_model, f"partition {name}"))
        except NeuronRuntimeError as error:
            raise AdviseError(str(error)) from None
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
        neuron_runtime=runtime,
    )
