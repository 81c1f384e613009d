"""Instance facts the cluster is sized from: accelerators, vCPU (cores x threads), memory and EFA interfaces.

Values come from Karpenter's generated instance-type reference (see DESIGN.md section 3); cores and threads
per core, which that reference does not list, from EC2 DescribeInstanceTypes (VCpuInfo DefaultCores and
DefaultThreadsPerCore; tests/slinky/test_slurm_cpus.py holds them to moto 5.2.5's recording of that API,
moto/ec2/resources/instance_types.json.gz). A partition's
instance types must all be in this table so that its NodePool limits, its NodeSet's device requests and
its sbatch template agree with the hardware.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Literal

AcceleratorKind = Literal["nvidia", "neuron", "none"]


@dataclass(frozen=True)
class InstanceType:
    name: str
    accelerator: AcceleratorKind
    accelerator_model: str  # e.g. "H100", "Trainium"; "" for CPU-only types
    accelerators: int  # GPUs or Neuron devices per node
    accelerator_memory_gib: int  # per accelerator
    vcpu: int
    memory_gib: int
    efa_interfaces: int
    # EC2 VCpuInfo.DefaultCores and DefaultThreadsPerCore: what `slurmd -C` reports as Boards x Sockets x
    # CoresPerSocket and ThreadsPerCore, and what Slinky's image counts CoreSpecCount in
    # (components/slinky/sizing.py). vcpu = cpu_cores x threads_per_core.
    cpu_cores: int
    threads_per_core: int
    # Logical NeuronCores per node, Trainium only: one torchrun worker each. trn2 groups two physical cores
    # into one logical core by default, so 64, not 128 (aws-neuron/aws-neuron-sdk frameworks/torch/
    # torch-neuronx/programming-guide/training/pytorch-neuron-programming-guide.rst: "For trn2.48xlarge, use
    # --nproc_per_node=64 for 64 Logical NeuronCores default").
    neuron_cores: int = 0

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def has_efa(self) -> bool:
        return self.efa_interfaces > 0


def _it(name: str, kind: AcceleratorKind, model: str, count: int, mem: int, vcpu: int, ram: int, efa: int,
        cores: int = 0, threads: int = 2) -> InstanceType:
    """`cores` are NeuronCores; CPU cores are vcpu / threads (every type here: DefaultThreadsPerCore 2)."""
    return InstanceType(name, kind, model, count, mem, vcpu, ram, efa, vcpu // threads, threads, cores)


CATALOG: dict[str, InstanceType] = {
    t.name: t
    for t in (
        _it("p4d.24xlarge", "nvidia", "A100", 8, 40, 96, 1152, 4),
        _it("p4de.24xlarge", "nvidia", "A100", 8, 80, 96, 1152, 4),
        _it("p5.48xlarge", "nvidia", "H100", 8, 80, 192, 2048, 32),
        _it("p5e.48xlarge", "nvidia", "H200", 8, 141, 192, 2048, 32),
        _it("p5en.48xlarge", "nvidia", "H200", 8, 141, 192, 2048, 16),
        _it("trn1.32xlarge", "neuron", "Trainium", 16, 32, 128, 512, 8, cores=32),
        _it("trn1n.32xlarge", "neuron", "Trainium", 16, 32, 128, 512, 16, cores=32),
        _it("trn2.48xlarge", "neuron", "Trainium2", 16, 96, 192, 2048, 16, cores=64),
        _it("g5.xlarge", "nvidia", "A10G", 1, 24, 4, 16, 0),
        _it("g5.12xlarge", "nvidia", "A10G", 4, 24, 48, 192, 1),
        _it("g5.48xlarge", "nvidia", "A10G", 8, 24, 192, 768, 1),
    )
}


class UnknownInstanceType(KeyError):
    """An instance type that is not in the catalog; carries the nearest known names."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name
        self.nearest = nearest_instance_types(name)


def nearest_instance_types(name: str, n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(CATALOG), n=n, cutoff=0.5)


def lookup(name: str) -> InstanceType:
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownInstanceType(name) from None


# --- what the kubelet leaves to pods ------------------------------------------------------------------
# EKS AL2023 nodes get kube-reserved and evictionHard from nodeadm (awslabs/amazon-eks-ami v20260724,
# nodeadm/internal/kubelet/config.go). Karpenter decides whether a pod fits an instance type it has not
# launched yet from the same formulas (aws/karpenter-provider-aws v1.14.1, pkg/providers/instancetype/
# types.go: memory(), kubeReservedResources(), evictionThreshold(), pods()), so a pod sized within them (and
# the DaemonSets' requests) is one Karpenter launches a node for.

# Pods the kubelet admits: default network card ENIs x (IPv4 addresses per ENI - 1) + 2, the figure both
# nodeadm (nodeadm/internal/kubelet/eni_max_pods.go CalcMaxPods, data in instance-info.jsonl) and Karpenter
# (ENILimitedPods) use; kube-reserved memory grows with it.
ENI_LIMITED_PODS: dict[str, int] = {
    "p4d.24xlarge": 737, "p4de.24xlarge": 737, "p5.48xlarge": 100, "p5e.48xlarge": 100, "p5en.48xlarge": 198,
    "trn1.32xlarge": 247, "trn1n.32xlarge": 247, "trn2.48xlarge": 100,
    "g5.xlarge": 58, "g5.12xlarge": 737, "g5.48xlarge": 345,
}
# Karpenter's estimate of the memory the hypervisor and kernel keep (VM_MEMORY_OVERHEAD_PERCENT default,
# pkg/operator/options/options.go): it plans with nominal memory minus this until it has seen a real node.
VM_MEMORY_OVERHEAD = 0.075
# nodeadm's evictionHard memory.available; it sets no systemReserved.
EVICTION_HARD_MEMORY_MIB = 100


@dataclass(frozen=True)
class Resources:
    cpu_millis: int
    memory_mib: int

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu_millis + other.cpu_millis, self.memory_mib + other.memory_mib)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu_millis - other.cpu_millis, self.memory_mib - other.memory_mib)


def kube_reserved_cpu_millis(vcpu: int) -> int:
    """6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest (nodeadm
    getCPUMillicoresToReserve, identical in Karpenter's kubeReservedResources)."""
    total = vcpu * 1000
    ranges = ((0, 1000, 600), (1000, 2000, 100), (2000, 4000, 50), (4000, total, 25))  # basis points
    return sum((min(total, end) - start) * bp // 10000 for start, end, bp in ranges if total > start)


def kube_reserved_memory_mib(max_pods: int) -> int:
    """11 MiB per pod + 255 MiB (nodeadm getMemoryMebibytesToReserve)."""
    return 11 * max_pods + 255


def allocatable(instance: InstanceType) -> Resources:
    """A node's allocatable CPU and memory as Karpenter plans it on EKS AL2023 (capacity less kube-reserved
    and the hard eviction threshold), before it has seen one: a real node reports more memory than the VM
    overhead estimate leaves."""
    nominal_mib = instance.memory_gib * 1024
    capacity_mib = nominal_mib - math.ceil(nominal_mib * VM_MEMORY_OVERHEAD)
    memory = capacity_mib - kube_reserved_memory_mib(ENI_LIMITED_PODS[instance.name]) - EVICTION_HARD_MEMORY_MIB
    return Resources(instance.vcpu * 1000 - kube_reserved_cpu_millis(instance.vcpu), memory)
