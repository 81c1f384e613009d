"""One torch from the tests to the image: the torch the partitions' default training images ship is the torch the
torchrun tests run (tests/jobs/runs.py IMAGE_VENV), pinned once in jobs/requirements-xla.txt; and the torchtitan
recipe's image (the PyTorch 2.13 DLC, docs/jobs.md) ships the main venv's torch. Each check is shown firing."""

from __future__ import annotations

import re
import subprocess
from importlib.metadata import version

import pytest

from components.slinky.images import TRAINING_IMAGES
from tests.jobs import runs

pytestmark = pytest.mark.torch

REQUIREMENTS = runs.REPO / "jobs" / "requirements-xla.txt"
# What each DLC's tag says its torch is: `pytorch-training:2.9.0-gpu-...`, `pytorch-training-neuronx:2.9.0-neuronx-...`
# (aws/deep-learning-containers buildspec-2-9-ec2.yml `version: 2.9.0`; aws-neuron/deep-learning-containers).
DLC_TORCH = re.compile(r"/pytorch-training(?:-neuronx)?:(?P<torch>\d+\.\d+\.\d+)-")
# The torchtitan recipe's image: the PyTorch 2.13 DLC (aws/deep-learning-containers
# .github/config/image/pytorch/2.13-ec2-cuda.yml: torch_version "2.13.0", prod_image pytorch:2.13-cu133-amzn2023).
TORCHTITAN_IMAGE_TORCH = "2.13.0"


def image_torch(image: str) -> str:
    match = DLC_TORCH.search(image)
    assert match, f"{image}: not a PyTorch DLC tag that names its torch; say which torch it ships"
    return match["torch"]


def pinned_torch(requirements: str) -> str:
    pins = re.findall(r"^torch==(\S+)$", requirements, re.MULTILINE)
    assert len(pins) == 1, f"jobs/requirements-xla.txt pins torch {len(pins)} times"
    return pins[0]


def mismatches(images: dict[str, str], pinned: str, installed: str) -> list[str]:
    """What disagrees among the images' torch, the pin and the torch the image venv holds."""
    found = [f"{kind} image {image} ships torch {image_torch(image)}, the tests pin {pinned}"
             for kind, image in images.items() if image_torch(image) != pinned]  # fmt: skip
    if installed.split("+")[0] != pinned:
        found.append(f"the image venv holds torch {installed}, jobs/requirements-xla.txt pins {pinned}: make xla-venv")
    return found


def test_the_images_torch_is_the_torch_the_torchrun_tests_run() -> None:
    installed = subprocess.run([runs.image_python(), "-c", "import torch; print(torch.__version__)"],
                               capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert mismatches(dict(TRAINING_IMAGES), pinned_torch(REQUIREMENTS.read_text()), installed) == []


def test_a_torch_apart_is_named() -> None:
    moved = {**TRAINING_IMAGES, "nvidia": "public.ecr.aws/deep-learning-containers/pytorch-training:2.10.0-gpu-py312"}
    assert mismatches(moved, "2.9.0", "2.9.0+cu128") == [
        "nvidia image public.ecr.aws/deep-learning-containers/pytorch-training:2.10.0-gpu-py312 ships torch 2.10.0, "
        "the tests pin 2.9.0"]
    assert mismatches(dict(TRAINING_IMAGES), "2.9.0", "2.9.1+cu128") == [
        "the image venv holds torch 2.9.1+cu128, jobs/requirements-xla.txt pins 2.9.0: make xla-venv"]
    with pytest.raises(AssertionError, match="pins torch 2 times"):
        pinned_torch("torch==2.9.0\ntorch==2.9.1\n")
    with pytest.raises(AssertionError, match="not a PyTorch DLC tag"):
        image_torch("docker.io/library/python:3.12")


def test_the_torchtitan_image_ships_the_main_venvs_torch() -> None:
    assert version("torch").split("+")[0] == TORCHTITAN_IMAGE_TORCH
