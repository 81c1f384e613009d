"""Every stand-in the twin gives a pod, with the mechanism that gives the real thing on EKS, in one table.

A stand-in replaces only what something outside the image provides at run time (a device plugin, the NVIDIA
container toolkit, the host's kernel and driver), or a part of the image that cannot run on this machine (pyxis
and enroot, which Dockerfile.pyxis installs). Each entry says which part of the pod's planned spec carries its
mechanism, and the twin gives a pod the stand-in only when the pod's spec has it (`given`): delete the GPU limit
from a NodeSet and its pods get no nvidia-smi, exactly as on EKS. Nothing here adds a tool to an image that the
image lacks: Slinky's slurmd image has no fi_info and no neuron-ls, and neither has the twin's.

docs/architecture.md's list of where the twin differs is generated from this table (scripts/twin/differences.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scripts.twin.hardware import EFA_RESOURCE, GPU_RESOURCE, NEURON_RESOURCE
from scripts.twin.operator.model import PodPlan

STANDINS_DIR = Path(__file__).resolve().parent / "standins"
# The image variants Dockerfile.pyxis builds (SlinkyProject/containers schedmd/slurm/25.11/ubuntu24.04
# Dockerfile.pyxis: `FROM .../slurmd:... AS slurmd-pyxis`, `FROM .../login:... AS login-pyxis`).
PYXIS_SUFFIX = "-pyxis"


def _limit(pod: PodPlan, resource: str) -> int:
    """The first container's limit of an extended resource (the slurmd or login container)."""
    limits = (pod.containers[0].resources or {}).get("limits") or {}
    return int(str(limits.get(resource, 0)))


def _image(pod: PodPlan) -> str:
    return pod.containers[0].image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]


def _pyxis(pod: PodPlan) -> bool:
    return _image(pod).endswith(PYXIS_SUFFIX)


def _slurmd_pyxis(pod: PodPlan) -> bool:
    return _image(pod) == f"slurmd{PYXIS_SUFFIX}"


@dataclass(frozen=True)
class StandIn:
    """One thing the twin gives a pod in place of the real one."""

    name: str
    gives: tuple[str, ...]  # what the container sees (paths)
    real: str  # what gives it on EKS, with its source
    mechanism: str  # the part of the pod's planned spec that carries that mechanism
    twin: str  # what the twin gives instead
    applies: Callable[[PodPlan], bool]

    def given(self, pod: PodPlan) -> bool:
        return self.applies(pod)


TABLE: tuple[StandIn, ...] = (
    StandIn(
        "GPU devices", ("/dev/nvidia<i>", "/dev/nvidiactl"),
        "NVIDIA's device plugin (NVIDIA/k8s-device-plugin) mounts one device per nvidia.com/gpu the container "
        "asked for",
        f"the container's limits hold {GPU_RESOURCE}",
        "character devices of the NVIDIA driver's major (195), one per GPU (scripts/twin/hardware.py)",
        lambda pod: _limit(pod, GPU_RESOURCE) > 0),
    StandIn(
        "nvidia-smi", ("/usr/bin/nvidia-smi",),
        "the NVIDIA Container Toolkit, the runtime of the EKS NVIDIA AMIs, mounts the driver's utility programs "
        "into a container given GPUs (NVIDIA_DRIVER_CAPABILITIES includes `utility`: NVIDIA container toolkit "
        "docs, docker-specialized.html); Slinky's image does not carry it",
        f"the container's limits hold {GPU_RESOURCE}",
        "scripts/twin/standins/devices, answering the queries node-check.sh makes from the /dev/nvidia<i> the "
        "pod has",
        lambda pod: _limit(pod, GPU_RESOURCE) > 0),
    StandIn(
        "NVIDIA driver files", ("/proc/driver/nvidia/gpus/<bus id>", "/sys/bus/pci/drivers/nvidia"),
        "the host's NVIDIA driver (the AMI's kernel module), seen through the container's /proc and /sys; Slurm's "
        "gpu/nvidia plugin reads them for AutoDetect=nvidia",
        f"the container's limits hold {GPU_RESOURCE}",
        "files in the driver's format for the instance type's GPUs, mounted over those directories",
        lambda pod: _limit(pod, GPU_RESOURCE) > 0),
    StandIn(
        "EFA devices", ("/dev/infiniband/uverbs<i>",),
        "the EFA device plugin (aws-efa-k8s-device-plugin) mounts one uverbs device per vpc.amazonaws.com/efa the "
        "container asked for",
        f"the container's limits hold {EFA_RESOURCE}",
        "character devices of the InfiniBand major (231), minors from 192",
        lambda pod: _limit(pod, EFA_RESOURCE) > 0),
    StandIn(
        "EFA sysfs", ("/sys/class/infiniband", "/sys/class/infiniband_verbs"),
        "the host kernel's EFA driver (installed by the EKS accelerated AMIs) in the container's sysfs: each "
        "uverbs<i>'s RDMA device and its port state (Linux Documentation/ABI/stable/sysfs-class-infiniband)",
        f"the container's limits hold {EFA_RESOURCE}",
        "one rdmap<i>s0 device per EFA device, port 1 `4: ACTIVE`",
        lambda pod: _limit(pod, EFA_RESOURCE) > 0),
    StandIn(
        "Neuron devices", ("/dev/neuron<i>",),
        "the Neuron device plugin mounts one Neuron driver device per aws.amazon.com/neuron the container asked for "
        "(Neuron SDK deploy/eks/setup)",
        f"the container's limits hold {NEURON_RESOURCE}",
        "character devices, one per Neuron device",
        lambda pod: _limit(pod, NEURON_RESOURCE) > 0),
    StandIn(
        "pyxis and enroot", ("/usr/share/pyxis/pyxis.conf", "/usr/lib/slurm-eks-twin/spank_pyxis.so",
                             "/usr/bin/enroot"),
        "Dockerfile.pyxis installs NVIDIA's enroot and pyxis in the slurmd-pyxis and login-pyxis images",
        "the container's image is a -pyxis variant",
        "a SPANK plugin that takes pyxis's options and runs each step on the pod's root "
        "(standins/pyxis_standin.c), and an `enroot import` that writes the image file (standins/enroot)",
        _pyxis),
    StandIn(
        "training environment", ("/usr/local/bin/torchrun", "/usr/local/bin/python3",
                                 "/usr/local/bin/neuron_parallel_compile"),
        "the job's training image, which pyxis starts for each step (`srun --container-image`, the partition's "
        "image in the rendered script)",
        "the slurmd container's image is slurmd-pyxis",
        "this checkout's venvs' torchrun and python (scripts/twin/cluster.py training_torchrun), on the pod's "
        "PATH, since the pyxis stand-in runs steps on the pod's root",
        _slurmd_pyxis),
)


LOGIN_CLI = StandIn(
    "slurm-eks CLI on the login pods", ("/usr/local/bin/slurm-eks", "/usr/local/bin/python3",
                                        "/usr/local/bin/torchrun"),
    "an operator installs the CLI once per cluster on /shared (tools/install_login_cli.sh, docs/jobs.md): a step "
    "of a person, not of the plan",
    "the pod is a LoginSet's (a login image)",
    "this checkout's venv's slurm-eks and python, and the training image's torchrun",
    lambda pod: _image(pod).startswith("login"))
TABLE = (*TABLE, LOGIN_CLI)


def given(pod: PodPlan) -> list[StandIn]:
    """The stand-ins the twin gives `pod`: those whose mechanism its planned spec has."""
    return [entry for entry in TABLE if entry.given(pod)]


def named(name: str) -> StandIn:
    (entry,) = [e for e in TABLE if e.name == name]
    return entry
