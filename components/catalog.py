"""Instance facts the cluster is sized from: accelerators, vCPU, memory and EFA interfaces.

Values come from Karpenter's generated instance-type reference (see DESIGN.md section 3). A partition's
instance types must all be in this table so that its NodePool limits, its NodeSet's device requests and
its sbatch template agree with the hardware.
"""

from __future__ import annotations

import difflib
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
    neuron_cores: int = 0  # per node, Trainium only
    efa_rdma: bool = False  # GPUDirect RDMA / Neuron RDMA over EFA (FI_EFA_USE_DEVICE_RDMA=1)

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def has_efa(self) -> bool:
        return self.efa_interfaces > 0


def _it(name: str, kind: AcceleratorKind, model: str, count: int, mem: int, vcpu: int, ram: int, efa: int,
        cores: int = 0, rdma: bool = True) -> InstanceType:
    return InstanceType(name, kind, model, count, mem, vcpu, ram, efa, cores, rdma and efa > 0)


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
        _it("trn2.48xlarge", "neuron", "Trainium2", 16, 96, 192, 2048, 16, cores=128),
        _it("g5.xlarge", "nvidia", "A10G", 1, 24, 4, 16, 0),
        _it("g5.12xlarge", "nvidia", "A10G", 4, 24, 48, 192, 1, rdma=False),
        _it("g5.48xlarge", "nvidia", "A10G", 8, 24, 192, 768, 1, rdma=False),
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
