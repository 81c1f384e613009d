"""What a twin slurmd pod's node looks like: the instance type's CPUs, memory and accelerators from the catalog
(components/catalog.py), told to Slurm through the same doors the real hardware uses.

- `slurmd -C`: Slinky's entrypoint (slurmd-entrypoint.sh calculateCoreSpecCount/calculateMemSpecLimit) reads
  the node's cores, threads and memory from it. The image layer's /usr/sbin/slurmd answers -C with the instance's
  hardware (read from /etc/slurm-eks-twin/hardware, mounted per pod) and otherwise runs the real slurmd with
  that hardware first in its --conf, where a dynamic node's hardware goes (Slurm 25.11 doc/html/dynamic_nodes.shtml:
  `slurmd -Z --conf "RealMemory=... Gres=..."`); `SlurmdParameters=config_overrides` (slurm.conf(5)) lets a node
  that has less than that register anyway, which this machine always does.
- GPUs: the plan's gres.conf says `AutoDetect=nvidia`, which Slurm 25.11's gpu/nvidia plugin answers from the
  NVIDIA driver's files (src/plugins/gpu/nvidia/gpu_nvidia.c: /proc/driver/nvidia/gpus/<bus id>/information,
  its "Device Minor:", "GPU UUID:" and "Model:" lines, and /sys/bus/pci/drivers/nvidia/<bus id>/local_cpulist),
  and the device files /dev/nvidia<minor> (character devices, major 195: the NVIDIA driver's). The pod gets
  those files and devices; nothing of the node's own /proc or /sys changes.
- Neuron devices: /dev/neuron<i> (the Neuron driver's character devices) for the Neuron runtime's view; Slurm
  does not schedule them as GRES in our stacks (components/slinky/slurm_conf.py nodeset_extra_conf).

Memory: the instance's nominal GiB. The kernel of a real instance reports a little less (/proc/meminfo MemTotal);
jobs get the pod's limit either way (RealMemory - MemSpecLimit = POD_MEMORY).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from components.catalog import InstanceType

HARDWARE_FILE = "/etc/slurm-eks-twin/hardware"
NVIDIA_MAJOR = 195  # Documentation/admin-guide/devices.txt: 195 char "Nvidia graphics devices"
NEURON_MAJOR = 240  # the first "LOCAL/EXPERIMENTAL" major: the Neuron driver allocates its major dynamically
NVIDIA_MODELS = {"A100": "NVIDIA A100-SXM4-{mem}GB", "H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200",
                 "A10G": "NVIDIA A10G"}
# EC2 DescribeInstanceTypes VCpuInfo.DefaultThreadsPerCore is 2 on every type of the catalog (Intel and AMD with
# SMT on); the catalog's own field wins when it has one.
DEFAULT_THREADS_PER_CORE = 2


@dataclass(frozen=True)
class NodeHardware:
    cpus: int
    cores: int
    threads_per_core: int
    real_memory_mib: int
    gpus: int
    gpu_model: str
    neuron_devices: int

    def conf_items(self) -> str:
        """The node's hardware as slurmd --conf / slurm.conf node parameters. One board and one socket holding
        every core: Slinky's arithmetic (CoreSpecCount = Boards x SocketsPerBoard x CoresPerSocket - POD_CPUS /
        ThreadsPerCore) uses only the product."""
        return (f"CPUs={self.cpus} Boards=1 SocketsPerBoard=1 CoresPerSocket={self.cores} "
                f"ThreadsPerCore={self.threads_per_core} RealMemory={self.real_memory_mib}")


def node_hardware(instance: InstanceType) -> NodeHardware:
    threads = getattr(instance, "threads_per_core", None) or DEFAULT_THREADS_PER_CORE
    template = NVIDIA_MODELS.get(instance.accelerator_model, f"NVIDIA {instance.accelerator_model}")
    return NodeHardware(
        cpus=instance.vcpu,
        cores=instance.vcpu // threads,
        threads_per_core=threads,
        real_memory_mib=instance.memory_gib * 1024,
        gpus=instance.accelerators if instance.accelerator == "nvidia" else 0,
        gpu_model=template.format(mem=instance.accelerator_memory_gib),
        neuron_devices=instance.accelerators if instance.accelerator == "neuron" else 0,
    )


def slurmd_shim(real_slurmd: Path) -> str:
    """/usr/sbin/slurmd of the twin's slurmd image (see the module docstring)."""
    real = shlex.quote(str(real_slurmd))
    return f"""#!/bin/bash
# The twin's slurmd: the instance type's hardware, from {HARDWARE_FILE} (scripts/twin/hardware.py).
set -euo pipefail
hardware="$(cat {HARDWARE_FILE})"
if [[ "${{1:-}}" == "-C" ]]; then
  echo "NodeName=$(hostname) ${{hardware}}"
  echo "UpTime=0-00:00:01"
  exit 0
fi
args=()
found=0
while (($#)); do
  case "$1" in
    --conf) args+=("--conf" "${{hardware}} $2"); found=1; shift 2 ;;
    --conf=*) args+=("--conf=${{hardware}} ${{1#--conf=}}"); found=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if ((found == 0)); then args+=("--conf" "${{hardware}}"); fi
exec {real} "${{args[@]}}"
"""


def nvidia_driver_files(directory: Path, hardware: NodeHardware) -> tuple[Path, Path]:
    """The driver's /proc/driver and /sys/bus/pci/drivers trees for the node's GPUs, under `directory`.
    Returns (proc_driver, sys_pci_drivers)."""
    proc, sys_drivers = directory / "proc-driver", directory / "sys-pci-drivers"
    for minor in range(hardware.gpus):
        bus_id = f"0000:{0x10 + minor:02x}:00.0"
        gpu = proc / "nvidia" / "gpus" / bus_id
        gpu.mkdir(parents=True, exist_ok=True)
        (gpu / "information").write_text(
            f"Model: \t\t {hardware.gpu_model}\nIRQ:   \t\t 0\n"
            f"GPU UUID: \t GPU-00000000-0000-0000-0000-{minor:012d}\nDevice Minor: \t {minor}\n")
        cpus = sys_drivers / "nvidia" / bus_id
        cpus.mkdir(parents=True, exist_ok=True)
        # Every CPU is local to every GPU: the driver's answer on one NUMA node (the catalog knows no more).
        (cpus / "local_cpulist").write_text(f"0-{hardware.cpus - 1}\n")
    proc.mkdir(parents=True, exist_ok=True)
    sys_drivers.mkdir(parents=True, exist_ok=True)
    return proc, sys_drivers


# Extended resources the device plugins serve, and the devices each gives a container that asks for it: NVIDIA's
# device plugin (nvidia.com/gpu: /dev/nvidia<i>, with /dev/nvidiactl), the EFA plugin (vpc.amazonaws.com/efa:
# /dev/infiniband/uverbs<i>, major 231 minors from 192: Linux devices.txt "InfiniBand ... 192 = uverbs0") and
# the Neuron plugin (aws.amazon.com/neuron: /dev/neuron<i>).
GPU_RESOURCE, EFA_RESOURCE, NEURON_RESOURCE = "nvidia.com/gpu", "vpc.amazonaws.com/efa", "aws.amazon.com/neuron"
INFINIBAND_MAJOR, UVERBS_FIRST_MINOR = 231, 192


def device_nodes(limits: Mapping[str, object]) -> list[tuple[str, int, int]]:
    """(path, major, minor) of the device files a container with these resource limits gets."""
    gpus, efa, neuron = (int(str(limits.get(r, 0))) for r in (GPU_RESOURCE, EFA_RESOURCE, NEURON_RESOURCE))
    nodes = [(f"/dev/nvidia{i}", NVIDIA_MAJOR, i) for i in range(gpus)]
    if gpus:
        nodes.append(("/dev/nvidiactl", NVIDIA_MAJOR, 255))
    nodes += [(f"/dev/infiniband/uverbs{i}", INFINIBAND_MAJOR, UVERBS_FIRST_MINOR + i) for i in range(efa)]
    nodes += [(f"/dev/neuron{i}", NEURON_MAJOR, i) for i in range(neuron)]
    return nodes


def efa_sysfs(directory: Path, count: int) -> Path:
    """The kernel's /sys/class entries for `count` EFA devices, under `directory`: infiniband_verbs/uverbs<i>/ibdev
    naming rdmap<i>s0, and infiniband/rdmap<i>s0/ports/1/state `4: ACTIVE` (Linux Documentation/ABI/stable/
    sysfs-class-infiniband; the state format of drivers/infiniband/core/sysfs.c state_show). Returns the
    directory, whose entries go into the pod's /sys/class."""
    for i in range(count):
        verbs = directory / "infiniband_verbs" / f"uverbs{i}"
        verbs.mkdir(parents=True, exist_ok=True)
        (verbs / "ibdev").write_text(f"rdmap{i}s0\n")
        port = directory / "infiniband" / f"rdmap{i}s0" / "ports" / "1"
        port.mkdir(parents=True, exist_ok=True)
        (port / "state").write_text("4: ACTIVE\n")
    directory.mkdir(parents=True, exist_ok=True)
    return directory
