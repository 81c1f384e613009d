"""`storage.efs`: the EFS file system for model weights, its `efs-ap` StorageClass and the model claim that
login and compute pods mount read-only. Without Pulumi, so the config and the Slinky specs can import it.

Unset (the default) builds nothing. The field values are the EFS API's (docs.aws.amazon.com/efs/latest/ug/
API_CreateFileSystem.html: PerformanceMode generalPurpose|maxIO, ThroughputMode bursting|provisioned|elastic)
and the EFS CSI driver's StorageClass parameters (kubernetes-sigs/aws-efs-csi-driver docs/README.md at
v3.4.1: directoryPerms, gidRangeStart, gidRangeEnd, basePath).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from components.config.base import Model

MODEL_PVC = "efs-models"  # the RWX claim, in the Slurm namespace and every namespace that mounts the models
# The models' directory on the file system: the root of the access point every model claim mounts (static
# volumes: a dynamically provisioned claim would get a directory of its own, not the shared weights).
MODEL_DIRECTORY = "/models"
MODEL_VOLUME_NAME = "models"  # the pod volume of that claim
STORAGE_CLASS = "efs-ap"
# The driver's defaults when a class names no GID range (pkg/driver/controller.go at v3.4.1: DefaultGidMin
# 50000, DefaultGidMax = DefaultGidMin + AccessPointPerFsLimit 10000).
DEFAULT_GID_START, DEFAULT_GID_END = 50000, 60000


class Efs(Model):
    performance_mode: Literal["generalPurpose", "maxIO"] = "generalPurpose"
    throughput_mode: Literal["bursting", "provisioned", "elastic"] = "elastic"
    # MiB/s, only with throughputMode provisioned (API_CreateFileSystem.html ProvisionedThroughputInMibps).
    provisioned_throughput_mibps: float | None = Field(None, gt=0)
    # The model claim's requested size (EFS is elastic: the number only satisfies the claim), default 1 TiB.
    claim_gib: int = Field(1024, alias="claimGiB", gt=0)
    mount_path: str = Field("/models", pattern=r"^/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$")
    # Access point settings the driver applies to each dynamically provisioned directory.
    directory_perms: str = Field("700", pattern=r"^[0-7]{3}$")
    gid_range_start: int = Field(DEFAULT_GID_START, gt=0)
    gid_range_end: int = Field(DEFAULT_GID_END, gt=0)
    base_path: str = Field("/claims", pattern=r"^/[A-Za-z0-9._/-]*$")
    # The POSIX user and group every request through the models' access point acts as (owner of /models),
    # outside the class's GID range so no dynamically provisioned directory shares it.
    model_owner_id: int = Field(40000, gt=0)

    @property
    def claim_size(self) -> str:
        return f"{self.claim_gib}Gi"


def model_volume(efs: Efs | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pod volume and read-only mount of the model claim (none when EFS is off). Read-only twice: the
    claim is mounted readOnly and the container's mount is, so no job can overwrite shared weights."""
    if efs is None:
        return [], []
    volume = {"name": MODEL_VOLUME_NAME, "persistentVolumeClaim": {"claimName": MODEL_PVC, "readOnly": True}}
    return [volume], [{"name": MODEL_VOLUME_NAME, "mountPath": efs.mount_path, "readOnly": True}]
