"""One RWX claim in a namespace bound to a static PersistentVolume of its own: how /shared (FSx) and /models (EFS)
reach every namespace that mounts them. A volume binds one claim, so each namespace gets its own volume
(components/names.py claim_volume_name) on the same data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.names import SLURM_NAMESPACE, claim_volume_name


@dataclass(frozen=True)
class StaticVolume:
    """What the volumes of one claim name share: the CSI source, size, and what they wait for."""

    claim: str  # the claim's name, the same in every namespace
    volume_resource: str  # Pulumi names: `<volume_resource>[-<namespace>]`, the Slurm namespace's unsuffixed
    claim_resource: str
    capacity: str
    csi: dict[str, Any]
    ready: Sequence[pulumi.Resource]  # the CSI driver (and mount targets) the volume needs
    mount_options: Sequence[str] = ()


def claim_in(volume: StaticVolume, namespace: str, depends_on: Sequence[pulumi.Resource], parent: pulumi.Resource,
             provider: k8s.Provider) -> list[pulumi.Resource]:
    """The volume and the claim bound to it in `namespace` (after `depends_on`, e.g. the namespace)."""
    suffix = "" if namespace == SLURM_NAMESPACE else f"-{namespace}"
    volume_name = claim_volume_name(volume.claim, namespace)
    pv = k8s.core.v1.PersistentVolume(
        f"{volume.volume_resource}{suffix}",
        metadata={"name": volume_name},
        spec={
            "capacity": {"storage": volume.capacity},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            # Deleting the claim never touches the data.
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            **({"mountOptions": list(volume.mount_options)} if volume.mount_options else {}),
            # Reserved for our claim: no other claim can bind this volume first.
            "claimRef": {"namespace": namespace, "name": volume.claim},
            "csi": volume.csi,
        },
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=list(volume.ready)))
    pvc = k8s.core.v1.PersistentVolumeClaim(
        f"{volume.claim_resource}{suffix}",
        metadata={"name": volume.claim, "namespace": namespace},
        spec={"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume_name,
              "resources": {"requests": {"storage": volume.capacity}}},
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=[pv, *depends_on]))
    return [pv, pvc]
