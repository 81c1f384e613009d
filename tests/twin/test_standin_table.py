"""The twin's stand-ins (scripts/twin/standin_table.py): each pod gets exactly those whose mechanism its planned spec
has, and a stand-in whose mechanism is deleted from the plan is gone, so the node health check fails there as it
would on EKS. The health check runs against what the table gives a pod, with the images' own tool set."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scripts.twin import hardware
from scripts.twin.operator.model import PodPlan
from scripts.twin.standin_table import STANDINS_DIR, TABLE, given
from tests.conftest import unavailable
from tests.twin.operator_plan import nodeset_pods, slinky

NODE_CHECK = Path(__file__).resolve().parents[2] / "slurm" / "node" / "node-check.sh"
FAKES = Path(__file__).resolve().parents[1] / "health" / "fakes"


def names(pod: PodPlan) -> set[str]:
    return {entry.name for entry in given(pod)}


GPU = {"GPU devices", "nvidia-smi", "NVIDIA driver files"}
EFA = {"EFA devices", "EFA sysfs"}
PYXIS = {"pyxis and enroot", "training environment"}


def test_each_partition_gets_what_its_hardware_asks_for() -> None:
    prod = nodeset_pods("prod")
    assert names(prod["gpu-h100"]) == GPU | EFA | PYXIS
    assert names(prod["gpu-a100"]) == GPU | EFA | PYXIS
    assert names(prod["trainium"]) == {"Neuron devices"} | EFA | PYXIS  # no nvidia-smi on a Trainium node
    assert names(nodeset_pods("dev")["gpu"]) == GPU | PYXIS  # g5: no EFA


def test_every_entry_serves_a_shipped_pod() -> None:
    """No stand-in without a pod whose plan has its mechanism (the login CLI serves the LoginSet)."""
    served = set().union(*(names(p) for stack in ("dev", "prod") for p in nodeset_pods(stack).values()))
    assert {entry.name for entry in TABLE} - served == {"slurm-eks CLI on the login pods"}


def drop_limit(resource: str) -> Any:
    def edit(nodeset: dict[str, Any]) -> None:
        nodeset["spec"]["slurmd"]["resources"]["limits"].pop(resource, None)
    return edit


@pytest.mark.parametrize(("resource", "gone"), [(hardware.GPU_RESOURCE, GPU), (hardware.EFA_RESOURCE, EFA)])
def test_deleting_a_mechanism_deletes_its_standins(resource: str, gone: set[str]) -> None:
    pod = nodeset_pods("prod", drop_limit(resource))["gpu-h100"]
    assert not names(pod) & gone and names(pod) >= PYXIS


def realise(pod: PodPlan, root: Path) -> dict[str, str]:
    """What the twin makes of the table for `pod` (scripts/twin/cluster.py _standins), under `root`: its devices,
    its /sys/class EFA entries and, where given, nvidia-smi on PATH. Returns node-check.sh's test environment."""
    if os.geteuid() != 0:
        unavailable("making character devices needs root")
    limits = (pod.containers[0].resources or {}).get("limits") or {}
    dev, bin_ = root / "dev", root / "bin"
    (dev / "infiniband").mkdir(parents=True)
    bin_.mkdir()
    entries = names(pod)
    prefixes = tuple(p for name, p in (("GPU devices", "/dev/nvidia"), ("EFA devices", "/dev/infiniband/"),
                                       ("Neuron devices", "/dev/neuron")) if name in entries)
    for path, major, minor in hardware.device_nodes(limits):
        if prefixes and path.startswith(prefixes):
            os.mknod(dev / path.removeprefix("/dev/"), 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    if "EFA sysfs" in entries:
        hardware.efa_sysfs(root / "sys" / "class", int(str(limits.get(hardware.EFA_RESOURCE, 0))))
    if "nvidia-smi" in entries:
        (bin_ / "nvidia-smi").symlink_to(STANDINS_DIR / "devices")
    # The fakes of the rest (scontrol, mountpoint, dmesg...) behind the pod's bin: never nvidia-smi, fi_info or
    # neuron-ls, which Slinky's image lacks.
    fakes = root / "fakes"
    fakes.mkdir()
    for fake in FAKES.iterdir():
        if fake.name not in ("nvidia-smi", "fi_info", "neuron-ls"):
            (fakes / fake.name).symlink_to(fake)
    return {"SLURM_EKS_HEALTH_DEV": str(dev), "SLURM_EKS_HEALTH_SYS": str(root / "sys"),
            "SLURM_EKS_HEALTH_PATH": f"{bin_}:{fakes}"}


def health_env(pod: PodPlan) -> str:
    """The partition's health.env as the plan writes it (components/slinky/health_settings.py)."""
    return str(slinky("prod").configmaps[f"slurm-eks-health-{pod.owner_name}"]["data"]["health.env"])


def run_check(pod: PodPlan, root: Path) -> subprocess.CompletedProcess[str]:
    env_file = root / "health.env"
    env_file.write_text(health_env(pod).replace("SHARED_MOUNT=", "#SHARED_MOUNT=")
                        .replace("DISK_PATHS=", "#DISK_PATHS=") + "\nMIN_FREE_MB=1\n")
    env = {"SLURMD_NODENAME": pod.name, "SLURM_EKS_HEALTH_ENV": str(env_file),
           "FAKE_SCONTROL_LOG": str(root / "scontrol.log"), **realise(pod, root)}
    return subprocess.run([str(NODE_CHECK), "check"], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("partition", ["gpu-h100", "gpu-a100", "trainium"])
def test_the_health_check_passes_on_what_the_platform_gives(tmp_path: Path, partition: str) -> None:
    pod = nodeset_pods("prod")[partition]
    result = run_check(pod, tmp_path)
    assert result.returncode == 0, f"prod/{partition} node {pod.name}: {result.stdout}"


@pytest.mark.parametrize(("resource", "check"), [(hardware.GPU_RESOURCE, "slurm-eks: gpu-driver: nvidia-smi not found"),
                                                 (hardware.EFA_RESOURCE, "slurm-eks: efa: the pod has 0 EFA devices")])
def test_without_the_mechanism_the_health_check_fails(tmp_path: Path, resource: str, check: str) -> None:
    """The GPU limit deleted from gpu-h100's NodeSet: no nvidia-smi, no devices, and the check drains the node."""
    pod = nodeset_pods("prod", drop_limit(resource))["gpu-h100"]
    result = run_check(pod, tmp_path)
    assert result.returncode == 1 and check in result.stdout, result.stdout
