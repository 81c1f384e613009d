"""Images: Slinky's pyxis variants of Slurm 25.11 by default, on the tag of a patch release (Slinky also
moves a `<series>-<os>` tag to each new patch), and every override reaching the objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.config.cluster import Slurm
from components.config.slinky_releases import SERIES, SLINKY_REPOSITORIES, pinning_problem, release_series
from components.slinky.images import TRAINING_IMAGES, slurm_image
from scripts.offline.plan_model import Plan
from tests.config.helpers import raw_config
from tests.plan.fixtures import shipped_plan
from tests.slinky.helpers import config_of, objects, plan_of, variant

CONTAINERS = {"Controller": "slurmctld", "Accounting": "slurmdbd", "RestApi": "slurmrestd", "LoginSet": "login",
              "NodeSet": "slurmd"}


def _images(plan: Plan) -> dict[str, set[str]]:
    return {kind: {doc["spec"][c]["image"] for doc in objects(plan, kind).values()} for kind, c in CONTAINERS.items()}


def test_default_images_are_slinky_pyxis_on_slurm_25_11_pinned_to_a_patch() -> None:
    repo = "ghcr.io/slinkyproject"
    assert _images(shipped_plan("prod")) == {
        "Controller": {f"{repo}/slurmctld:25.11.8-ubuntu24.04"},
        "Accounting": {f"{repo}/slurmdbd:25.11.8-ubuntu24.04"},
        "RestApi": {f"{repo}/slurmrestd:25.11.8-ubuntu24.04"},
        "LoginSet": {f"{repo}/login-pyxis:25.11.8-ubuntu24.04"},
        "NodeSet": {f"{repo}/slurmd-pyxis:25.11.8-ubuntu24.04"},
    }
    plugstack = objects(shipped_plan("prod"), "ConfigMap")["slurm-plugstack"]["data"]["plugstack.conf"]
    assert plugstack == "include /usr/share/pyxis/*\n"


def test_partitions_file_on_the_login_pod_names_each_training_image() -> None:
    data = objects(shipped_plan("prod"), "ConfigMap")["slurm-eks-partitions"]["data"]["partitions.json"]
    partitions = json.loads(data)
    assert {n: p["image"] for n, p in partitions.items()} == {
        "gpu-h100": TRAINING_IMAGES["nvidia"], "gpu-a100": TRAINING_IMAGES["nvidia"],
        "trainium": TRAINING_IMAGES["neuron"]}
    assert partitions["gpu-h100"]["default"] is True and partitions["trainium"]["acceleratorsPerNode"] == 16


def test_version_images_and_partition_image_override(tmp_path: Path) -> None:
    def change(raw: dict[str, Any]) -> None:
        raw["slurm"]["version"] = "25.11.9"
        raw["slurm"]["images"] = {"slurmd": "123456789012.dkr.ecr.us-west-2.amazonaws.com/slurmd-efa:25.11.8-1"}
        raw["partitions"]["trainium"]["image"] = "123456789012.dkr.ecr.us-west-2.amazonaws.com/neuron:2.27.1"

    plan = plan_of(variant("prod", change), tmp_path)
    images = _images(plan)
    assert images["Controller"] == {"ghcr.io/slinkyproject/slurmctld:25.11.9-ubuntu24.04"}
    assert images["NodeSet"] == {"123456789012.dkr.ecr.us-west-2.amazonaws.com/slurmd-efa:25.11.8-1"}
    partitions = json.loads(objects(plan, "ConfigMap")["slurm-eks-partitions"]["data"]["partitions.json"])
    assert partitions["trainium"]["image"] == "123456789012.dkr.ecr.us-west-2.amazonaws.com/neuron:2.27.1"
    assert partitions["gpu-h100"]["image"] == TRAINING_IMAGES["nvidia"]


@pytest.mark.parametrize(("version", "tag"), [("25.11", "25.11.8-ubuntu24.04"), ("25.11.6", "25.11.6-ubuntu24.04"),
                                              ("25.11.9", "25.11.9-ubuntu24.04"), ("26.05", "26.05.4-ubuntu26.04")])
def test_a_series_means_its_pinned_patch_and_a_patch_itself(version: str, tag: str) -> None:
    slurm = Slurm(version=version)
    # slurmd and login run the pyxis variants (docs/operating.md, Images).
    repositories = {"slurmctld": "slurmctld", "slurmd": "slurmd-pyxis", "slurmdbd": "slurmdbd",
                    "slurmrestd": "slurmrestd", "login": "login-pyxis"}
    assert {daemon: slurm_image(slurm, daemon) for daemon in SLINKY_REPOSITORIES} == {
        daemon: f"ghcr.io/slinkyproject/{repository}:{tag}" for daemon, repository in repositories.items()}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_default_slurm_image_passes_the_pinning_rule(stack: str) -> None:
    """The images the program picks by itself are held to the rule a stack's own images are (image-pinned)."""
    config = config_of(raw_config(stack))
    assert {daemon: pinning_problem(slurm_image(config.slurm, daemon)) for daemon in SLINKY_REPOSITORIES} == {
        daemon: None for daemon in SLINKY_REPOSITORIES}


def test_each_series_default_is_its_newest_known_release_on_a_known_flavor() -> None:
    for name, series in SERIES.items():
        assert series.releases[-1] == series.patch and series.os in series.flavors
        assert all(release_series(r) == name for r in series.releases)


@pytest.mark.parametrize(("image", "problem"), [
    ("ghcr.io/slinkyproject/slurmd-pyxis:25.11.6-ubuntu24.04", None),
    ("ghcr.io/slinkyproject/slurmctld:26.05.0-rockylinux9", None),
    ("123456789012.dkr.ecr.us-west-2.amazonaws.com/slurmd-efa:25.11.6-1", None),
    (f"ghcr.io/slinkyproject/slurmctld@sha256:{'a' * 64}", None),
    ("ghcr.io/slinkyproject/slurmctld:25.11-ubuntu24.04", "<series>-<os> tags move"),
    ("ghcr.io/slinkyproject/slurmctld:25.11.9-ubuntu24.04", "no images of Slurm 25.11.9"),
    ("ghcr.io/slinkyproject/slurmctld:25.11.8-ubuntu24.04", None),
    ("ghcr.io/slinkyproject/slurmctld:26.05.1-ubuntu22.04", "no ubuntu22.04 images of Slurm 26.05"),
    ("ghcr.io/slinkyproject/slurmctld@sha256:abc", "not sha256:<64 hex digits>"),
    ("public.ecr.aws/neuron/pytorch-training-neuronx:2.9", "tag 2.9 moves"),
    ("mariadb:11.4", "tag 11.4 moves"),
    ("busybox:latest", "tag latest moves"),
    ("registry.example.com:5000/slurmd", "no tag"),
])
def test_pinning_problem(image: str, problem: str | None) -> None:
    found = pinning_problem(image)
    assert found is None if problem is None else problem in (found or ""), found


@pytest.mark.parametrize("image", TRAINING_IMAGES.values())
def test_default_training_images_are_pinned(image: str) -> None:
    assert pinning_problem(image) is None
