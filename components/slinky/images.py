"""Which image each Slurm daemon runs and which image a partition's job steps run in, from the config alone.
Which releases Slinky built, and when an image reference is pinned: components/config/slinky_releases.py."""

from __future__ import annotations

from components import catalog
from components.compute.scheduling import partition_instance
from components.config.cluster import Partition, Slurm
from components.config.slinky_releases import (
    SERIES,
    SLINKY_REGISTRY,
    SLINKY_REPOSITORIES,
    Daemon,
    patch_release,
    release_series,
)

# Default training images (public, pinned): AWS's PyTorch DLC ships CUDA, NCCL, the EFA installer and
# aws-ofi-nccl; the Neuron DLC ships torch-neuronx, neuronx-cc and the Neuron runtime.
TRAINING_IMAGES: dict[catalog.AcceleratorKind, str] = {
    "nvidia": "public.ecr.aws/deep-learning-containers/pytorch-training:2.9.0-gpu-py312-cu130-ubuntu22.04-ec2-v1.11",
    "neuron": "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04",
}



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
