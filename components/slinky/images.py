"""Which image each Slurm daemon runs and which image a partition's job steps run in, from the config alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components import catalog
from components.config import Partition, Slurm
from components.scheduling import partition_instance

Daemon = Literal["slurmctld", "slurmd", "slurmdbd", "slurmrestd", "login"]

SLINKY_REGISTRY = "ghcr.io/slinkyproject"


@dataclass(frozen=True)
class Series:
    patch: str  # the release `slurm.version: <series>` stands for
    os: str  # the base OS of Slinky's images of this series


# Slinky tags each image `<series>-<os>`, which moves to every new patch release, and `<patch>-<os>`, which
# does not (SlinkyProject/containers schedmd/slurm/docker-bake.hcl, format_tag). We use the second: the
# patches are `slurm_version` in schedmd/slurm/<series>/<os>/slurm.hcl at 05efda08.
SERIES = {"25.11": Series("25.11.6", "ubuntu24.04"), "26.05": Series("26.05.1", "ubuntu26.04")}
# The pyxis variants carry enroot + pyxis, so `srun --container-image=...` runs steps in a training image.
SLINKY_REPOSITORIES: dict[Daemon, str] = {
    "slurmctld": "slurmctld",
    "slurmd": "slurmd-pyxis",
    "slurmdbd": "slurmdbd",
    "slurmrestd": "slurmrestd",
    "login": "login-pyxis",
}
# Default training images (public, pinned): AWS's PyTorch DLC ships CUDA, NCCL, the EFA installer and
# aws-ofi-nccl; the Neuron DLC ships torch-neuronx, neuronx-cc and the Neuron runtime.
TRAINING_IMAGES: dict[catalog.AcceleratorKind, str] = {
    "nvidia": "public.ecr.aws/deep-learning-containers/pytorch-training:2.9.0-gpu-py312-cu130-ubuntu22.04-ec2-v1.11",
    "neuron": "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04",
}


def release_series(version: str) -> str:
    """"25.11.6" -> "25.11"."""
    return ".".join(version.split(".")[:2])


def patch_release(version: str) -> str:
    """`slurm.version` as a patch release: "25.11" -> the patch pinned for that series, "25.11.6" -> itself."""
    return SERIES[version].patch if version in SERIES else version


def slurm_image(slurm: Slurm, daemon: Daemon) -> str:
    """`slurm.images.<daemon>` if set, else Slinky's image of `slurm.version` (validated to a known series),
    by the tag of its patch release."""
    override: str | None = getattr(slurm.images, daemon)
    if override:
        return override
    flavor = SERIES[release_series(slurm.version)].os
    return f"{SLINKY_REGISTRY}/{SLINKY_REPOSITORIES[daemon]}:{patch_release(slurm.version)}-{flavor}"


def training_image(partition: Partition) -> str | None:
    """`partitions.<name>.image` if set, else the default for the partition's accelerator (None for CPU)."""
    return partition.image or TRAINING_IMAGES.get(partition_instance(partition).accelerator)
