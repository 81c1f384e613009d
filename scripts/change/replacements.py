"""Replace against update, before Pulumi runs. Offline: each stateful type's replace-triggering inputs, from the
providers' source, mark a planned change as a replacement. Online: `pulumi preview --json` says it itself, and a
replace or delete of a stateful resource is refused unless its URN is allowed.

Sources (read for this table; docs/operating.md "Changing a running cluster"):
- pulumi-aws v7 bridges terraform-provider-aws v6: an attribute with `ForceNew: true`, or a CustomizeDiff that
  calls ForceNew, is a replacement. internal/service/fsx/lustre_file_system.go (v6.32: ForceNew deployment_type,
  subnet_ids, security_group_ids, storage_type, kms_key_id, efa_enabled, ...; storage_capacity only when it falls,
  file_system_type_version only when it falls), fsx/data_repository_association.go (data_repository_path,
  file_system_id, file_system_path), rds/instance.go (engine, db_name, username, storage_encrypted, kms_key_id,
  availability_zone, ...; instance_class, allocated_storage and identifier are updated in place), efs/
  file_system.go (performance_mode, encrypted, kms_key_id, creation_token, availability_zone_name), efs/
  mount_target.go (file_system_id, subnet_id, ip_address), eks/cluster.go (name, role_arn, bootstrap_self_managed_
  addons, kubernetes_network_config.service_ipv4_cidr/ip_family; removing encryption_config), eks/node_group.go
  (instance_types, subnet_ids, capacity_type, ami_type, disk_size, node_group_name, node_role_arn, launch_template
  id/name). pulumi-eks v4's Cluster and ManagedNodeGroup components pass these inputs to those resources.
- pulumi-kubernetes v4.32 provider/pkg/provider/diff.go: metadata.name and metadata.namespace replace any object;
  a PersistentVolume's volume source (spec.csi, ...), a PersistentVolumeClaim's spec.accessModes, selector,
  storageClassName and volumeName; a custom resource (a NodeSet) nothing else.
- `pulumi preview --json`: pulumi/pulumi pkg/display/json.go PreviewDigest {steps, changeSummary, diagnostics},
  PreviewStep {op, urn, oldState, newState, diffReasons, replaceReasons, detailedDiff}; ops from pkg/resource/
  deploy/step.go."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from scripts.offline.diff import PlanDiff, PropertyChange

_ANY_K8S = ("metadata.name", "metadata.namespace")
_PV_SOURCES = tuple(f"spec.{s}" for s in (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
    "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk", "portworxVolume",
    "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume"))


def _falls(change: PropertyChange) -> bool:
    old, new = change.old, change.new
    if isinstance(old, int | float) and isinstance(new, int | float):
        return new < old
    return isinstance(old, str) and isinstance(new, str) and new < old


# type -> (inputs whose change replaces it, inputs that replace it only when they fall)
REPLACE_TRIGGERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "aws:fsx/lustreFileSystem:LustreFileSystem": (
        ("backupId", "copyTagsToBackups", "deploymentType", "driveCacheType", "efaEnabled", "exportPath",
         "importPath", "importedFileChunkSize", "kmsKeyId", "securityGroupIds", "storageType", "subnetIds"),
        ("storageCapacity", "fileSystemTypeVersion")),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": (
        ("dataRepositoryPath", "fileSystemId", "fileSystemPath"), ()),
    "aws:rds/instance:Instance": (
        ("availabilityZone", "backupTarget", "characterSetName", "customIamInstanceProfile", "dbName", "engine",
         "kmsKeyId", "ncharCharacterSetName", "snapshotIdentifier", "storageEncrypted", "timezone", "username",
         "restoreToPointInTime", "s3Import"), ()),
    "aws:efs/fileSystem:FileSystem": (
        ("availabilityZoneName", "creationToken", "encrypted", "kmsKeyId", "performanceMode"), ()),
    "aws:efs/mountTarget:MountTarget": (("fileSystemId", "subnetId", "ipAddress", "ipAddressType", "ipv6Address"), ()),
    "eks:index:Cluster": (("name", "serviceRole", "ipFamily", "kubernetesServiceIpAddressRange",
                           "bootstrapSelfManagedAddons"), ()),
    "aws:eks/cluster:Cluster": (("name", "roleArn", "bootstrapSelfManagedAddons", "kubernetesNetworkConfig",
                                 "outpostConfig"), ()),
    "eks:index:ManagedNodeGroup": (("amiType", "capacityType", "cluster", "diskSize", "instanceTypes",
                                    "nodeGroupName", "nodeGroupNamePrefix", "nodeRole", "nodeRoleArn", "subnetIds",
                                    "remoteAccess"), ()),
    "aws:eks/nodeGroup:NodeGroup": (("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes",
                                     "nodeGroupName", "nodeGroupNamePrefix", "nodeRoleArn", "subnetIds",
                                     "remoteAccess"), ()),
    "kubernetes:core/v1:PersistentVolume": ((*_ANY_K8S, *_PV_SOURCES), ()),
    "kubernetes:core/v1:PersistentVolumeClaim": ((*_ANY_K8S, "spec.accessModes", "spec.selector",
                                                  "spec.storageClassName", "spec.volumeName"), ()),
    "kubernetes:slinky.slurm.net/v1beta1:NodeSet": (_ANY_K8S, ()),
}
# What holds state a replacement or deletion loses: these types are refused unless allowed by URN.
STATEFUL = frozenset(REPLACE_TRIGGERS) - {"aws:efs/mountTarget:MountTarget"}


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith((f"{prefix}.", f"{prefix}["))


def triggers(type_: str, changes: list[PropertyChange]) -> list[str]:
    """The changed inputs of a resource of `type_` that make Pulumi replace it (empty: an update)."""
    always, falling = REPLACE_TRIGGERS.get(type_, ((), ()))
    out = []
    for change in changes:
        if not change.path.startswith("inputs."):
            continue  # protect, provider, parent: options, not inputs
        path = change.path.removeprefix("inputs.")
        if any(_under(path, p) for p in always) or (any(_under(path, p) for p in falling) and _falls(change)):
            out.append(path)
    return out


def offline_replacements(diff: PlanDiff) -> dict[str, list[str]]:
    """URN -> the inputs that replace it, for each changed resource Pulumi would replace."""
    return {r.urn: hits for r, changes in diff.changed if (hits := triggers(r.type, changes))}


class PreviewUnreadable(ValueError):
    """Output of `pulumi preview --json` that is not its JSON document."""


@dataclass(frozen=True)
class Step:
    op: str
    urn: str
    type: str
    reasons: tuple[str, ...]


_LOSES = frozenset({"replace", "create-replacement", "delete-replaced", "delete", "discard", "discard-replaced"})


def preview_steps(document: str) -> list[Step]:
    try:
        digest = json.loads(document)
    except ValueError as exc:
        raise PreviewUnreadable(f"not JSON: {exc}") from None
    if not isinstance(digest, dict) or not isinstance(digest.get("steps", []), list):
        raise PreviewUnreadable("no `steps` list")
    return [_step(s) for s in digest.get("steps", [])]


def _step(step: dict[str, Any]) -> Step:
    state = step.get("newState") or step.get("oldState") or {}
    urn = str(step.get("urn", ""))
    type_ = str(state.get("type") or urn.split("::")[2].rpartition("$")[2] if urn.count("::") >= 3 else "")
    detailed = step.get("detailedDiff") or {}
    reasons = step.get("replaceReasons") or [k for k, v in detailed.items()
                                             if str((v or {}).get("kind", "")).endswith("-replace")]
    return Step(str(step.get("op", "")), urn, type_, tuple(reasons))


def blocked(steps: list[Step], allowed: list[str]) -> list[Step]:
    """Replacements and deletions of stateful resources not allowed by URN."""
    return [s for s in steps if s.op in _LOSES and s.type in STATEFUL and s.urn not in allowed]


def render_steps(steps: list[Step]) -> str:
    counts = Counter(s.op for s in steps)
    lines = ["pulumi preview: " + (", ".join(f"{n} {op}" for op, n in sorted(counts.items())) or "no steps")]
    lines += [f"  {s.op} {s.type} {s.urn}" + (f" (because {', '.join(s.reasons)})" if s.reasons else "")
              for s in steps if s.op not in ("same", "read", "refresh")]
    return "\n".join(lines) + "\n"
