"""Pieces every builder shares: the logfile sidecar, the initconf init container, the operator's own volumes,
pod metadata layering, StatefulSet pod identity and resource limits.

Ports of slurm-operator v1.2.1 internal/builder/common/common.go (LogfileContainer, LogFileVolume,
PidfileVolume, EtcSlurmVolume, InitconfContainer, GetPodResourceLimits, GetContainerResourceLimits,
JwtSecretProjection, JwksConfigProjection, DefaultPort), internal/builder/metadata/metadata.go (the order in
which annotations and labels are layered) and, for the pods a StatefulSet makes, kubernetes
pkg/controller/statefulset/stateful_set_utils.go initIdentity/updateIdentity and
pkg/controller/controller_utils.go GetPodFromTemplate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts, scripts
from scripts.twin.operator.merge import build_container
from scripts.twin.operator.model import PodPlan, pod_from_spec
from scripts.twin.operator.quantity import quantity_value


def layered(*maps: Mapping[str, str] | None) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/metadata/metadata.go WithAnnotations/WithLabels (maps.Copy in
    call order: a later map's value wins) and internal/utils/structutils/map.go MergeMaps."""
    out: dict[str, str] = {}
    for m in maps:
        out.update(m or {})
    return out


def template_metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """spec.template.metadata (labels, annotations) of a Controller, NodeSet, LoginSet, RestApi or Accounting."""
    return ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}


def template_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """spec.template.spec: the user's pod spec the operator merges onto its own."""
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def logfile_volume() -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/common.go LogFileVolume: emptyDir in memory."""
    return {"name": consts.SLURM_LOGFILE_VOLUME, "emptyDir": {"medium": "Memory"}}


def pidfile_volume() -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/common.go PidfileVolume: emptyDir in memory named "run"."""
    return {"name": consts.SLURM_PIDFILE_VOLUME, "emptyDir": {"medium": "Memory"}}


def etc_slurm_volume() -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/common.go EtcSlurmVolume: emptyDir in memory (login pods;
    initconf fills it)."""
    return {"name": consts.SLURM_ETC_VOLUME, "emptyDir": {"medium": "Memory"}}


def secret_projection(ref: Mapping[str, str], path: str) -> dict[str, Any]:
    """One Secret key projected at `path` (common.go JwtSecretProjection; the builders inline the same shape
    for slurm.key)."""
    return {"secret": {"name": ref["name"], "items": [{"key": ref["key"], "path": path}]}}


def jwks_projection(ref: Mapping[str, str]) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/common.go JwksConfigProjection at jwks.json."""
    return {"configMap": {"name": ref["name"], "items": [{"key": ref["key"], "path": consts.JWKS_KEY_FILE}]}}


def logfile_container(merge: Mapping[str, Any] | None, logfile_path: str) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/common.go LogfileContainer: the "logfile" native sidecar
    (restartPolicy Always) running scripts.LOGFILE with SOCKET=<logfile_path>, mounting slurm-logfile at
    /var/log/slurm, merged with the object's spec.logfile."""
    base = {
        "name": "logfile",
        "env": [{"name": "SOCKET", "value": logfile_path}],
        "command": ["sh", "-c", scripts.LOGFILE],
        "restartPolicy": "Always",
        "volumeMounts": [{"name": consts.SLURM_LOGFILE_VOLUME, "mountPath": consts.SLURM_LOGFILE_DIR}],
    }
    return build_container(base, merge)


def initconf_container(merge: Mapping[str, Any] | None) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/common.go InitconfContainer: the "initconf" init container
    (scripts.INITCONF, SLURM_USER=slurm) copying /mnt/slurm's *.conf and *.key into the slurm-etc emptyDir,
    merged with the object's spec.initconf."""
    base = {
        "name": "initconf",
        "env": [{"name": "SLURM_USER", "value": consts.SLURM_USER}],
        "command": ["sh", "-c", scripts.INITCONF],
        "volumeMounts": [
            {"name": consts.SLURM_ETC_VOLUME, "mountPath": consts.SLURM_ETC_MOUNT_DIR},
            {"name": consts.SLURM_CONFIG_VOLUME, "mountPath": consts.SLURM_CONFIG_DIR, "readOnly": True},
        ],
    }
    return build_container(base, merge)


def default_port(port: int | None, default: int) -> int:
    """slurm-operator v1.2.1 internal/builder/common/common.go DefaultPort: 0 (unset) means the default."""
    return int(port or 0) or default


def _limits(limits: Mapping[str, Any] | None) -> tuple[int, int]:
    """ResourceList.Cpu().Value() and .Memory().Value() (zero when absent)."""
    limits = limits or {}
    cpu = quantity_value(limits["cpu"]) if "cpu" in limits else 0
    memory = quantity_value(limits["memory"]) if "memory" in limits else 0
    return cpu, memory


def pod_resource_limits(pod_spec: Mapping[str, Any]) -> tuple[int, int]:
    """slurm-operator v1.2.1 internal/builder/common/common.go GetPodResourceLimits: (cpus, memory bytes) from
    the pod-level spec.resources.limits, each rounded up to an integer (Quantity.Value); 0 when unset."""
    resources = pod_spec.get("resources")
    return _limits(resources.get("limits")) if resources is not None else (0, 0)


def container_resource_limits(container: Mapping[str, Any]) -> tuple[int, int]:
    """slurm-operator v1.2.1 internal/builder/common/common.go GetContainerResourceLimits: (cpus, memory bytes)
    from the container's resources.limits; 0 when unset."""
    return _limits((container.get("resources") or {}).get("limits"))


def statefulset_pod(
    template: Mapping[str, Any],
    *,
    set_name: str,
    service_name: str,
    ordinal: int = 0,
) -> PodPlan:
    """The pod a StatefulSet makes from `template` (a PodTemplateSpec dict): kubernetes
    pkg/controller/controller_utils.go GetPodFromTemplate (labels, annotations and spec copied) and
    pkg/controller/statefulset/stateful_set_utils.go initIdentity/updateIdentity: name `<set>-<ordinal>`,
    hostname = name, subdomain = the StatefulSet's serviceName, labels statefulset.kubernetes.io/pod-name and
    apps.kubernetes.io/pod-index. (The controller-revision-hash label is left out: it hashes the revision.)"""
    meta = template.get("metadata") or {}
    name = f"{set_name}-{ordinal}"
    spec = dict(template.get("spec") or {})
    spec["hostname"] = name
    spec["subdomain"] = service_name
    labels = layered(meta.get("labels"), {consts.STATEFULSET_POD_NAME_LABEL: name,
                                          consts.POD_INDEX_LABEL: str(ordinal)})
    return pod_from_spec(name=name, namespace=str(meta.get("namespace") or ""), labels=labels,
                         annotations=meta.get("annotations") or {}, spec=spec, owner_kind="StatefulSet",
                         owner_name=set_name)


def deployment_pod(template: Mapping[str, Any], *, deployment_name: str, replica: int = 0) -> PodPlan:
    """The pod a Deployment makes from `template` (GetPodFromTemplate: labels, annotations and spec copied).

    Kubernetes names it `<deployment>-<pod-template-hash>-<5 random chars>` with hostname = that name; the
    twin names replica i `<deployment>-<i>` (hostname the same) since the hash and suffix are not derivable
    offline. The pod-template-hash label is left out for the same reason.
    """
    meta = template.get("metadata") or {}
    name = f"{deployment_name}-{replica}"
    spec = dict(template.get("spec") or {})
    spec.setdefault("hostname", name)
    return pod_from_spec(name=name, namespace=str(meta.get("namespace") or ""), labels=meta.get("labels") or {},
                         annotations=meta.get("annotations") or {}, spec=spec, owner_kind="Deployment",
                         owner_name=deployment_name)
