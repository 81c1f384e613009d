"""The Controller's pod (slurmctld) as the operator's StatefulSet `<name>-controller` runs it.

Ports of slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go (BuildController,
controllerPodTemplate, controllerVolumes, slurmctldContainer, reconfigureContainer, clusterSpoolDir) and
internal/defaults/controller.go (persistence on by default).

slurmctld gets no command or args from the operator (the image's entrypoint runs it); its /etc/slurm is the
projected slurm-etc volume: the `<name>-config` ConfigMap (slurm.conf, cgroup.conf), slurm.key, jwt.key, every
configFileRefs and *ScriptRefs ConfigMap (sorted by name, all keys) and jwks.json -- see etcfiles.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts, scripts
from scripts.twin.operator.common import (
    jwks_projection,
    layered,
    logfile_container,
    secret_projection,
    statefulset_pod,
    template_metadata,
    template_spec,
)
from scripts.twin.operator.labels import controller_labels
from scripts.twin.operator.merge import build_container, build_pod_template
from scripts.twin.operator.model import PodPlan
from scripts.twin.operator.names import (
    cluster_spool_dir,
    controller_cluster_name,
    controller_config_name,
    controller_jwks_ref,
    controller_jwt_key_ref,
    controller_key,
    controller_service_name,
    controller_slurm_key_ref,
    namespace_of,
    ref_name,
    spec_of,
)

CONFIG_REF_FIELDS = ("configFileRefs", "prologScriptRefs", "epilogScriptRefs", "prologSlurmctldScriptRefs",
                     "epilogSlurmctldScriptRefs")


def extra_configmap_names(controller: Mapping[str, Any]) -> list[str]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go controllerPodTemplate: the
    ConfigMaps of configFileRefs, prologScriptRefs, epilogScriptRefs, prologSlurmctldScriptRefs and
    epilogSlurmctldScriptRefs, in that order (controllerVolumes sorts them)."""
    spec = spec_of(controller)
    return [ref_name(ref) for f in CONFIG_REF_FIELDS for ref in spec.get(f) or ()]


def controller_volumes(controller: Mapping[str, Any]) -> list[dict[str, Any]]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go controllerVolumes.

    slurm-etc (projected, defaultMode 0o610): `<name>-config`, slurm.key, jwt.key, the extra ConfigMaps sorted
    by name (every key), jwks.json when spec.jwksKeyRef; then slurm-logfile, run, slurm-authsocket (emptyDir).
    """
    sources: list[dict[str, Any]] = [
        {"configMap": {"name": controller_config_name(controller)}},
        secret_projection(controller_slurm_key_ref(controller), consts.SLURM_KEY_FILE),
        secret_projection(controller_jwt_key_ref(controller), consts.JWT_KEY_FILE),
    ]
    sources += [{"configMap": {"name": name}} for name in sorted(extra_configmap_names(controller))]
    jwks = controller_jwks_ref(controller)
    if jwks is not None:
        sources.append(jwks_projection(jwks))
    return [
        {"name": consts.SLURM_ETC_VOLUME, "projected": {"defaultMode": 0o610, "sources": sources}},
        {"name": consts.SLURM_LOGFILE_VOLUME, "emptyDir": {"medium": "Memory"}},
        {"name": consts.SLURM_PIDFILE_VOLUME, "emptyDir": {"medium": "Memory"}},
        {"name": consts.SLURM_AUTH_SOCKET_VOLUME, "emptyDir": {}},
    ]


def _http_probe(path: str, port: str, *, thresholds: bool) -> dict[str, Any]:
    probe: dict[str, Any] = {"httpGet": {"path": path, "port": port}}
    if thresholds:
        probe.update(failureThreshold=6, periodSeconds=10)
    return probe


def slurmctld_container(merge: Mapping[str, Any] | None, cluster_name: str) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go slurmctldContainer: no command
    or args; port slurmctld 6817; startup/liveness GET /livez, readiness GET /readyz on that port; runs as
    401:401; mounts /etc/slurm (ro), /run, the statesave volume at /var/spool/slurmctld/<cluster>,
    /run/slurmctld (auth socket) and /var/log/slurm; merged with spec.slurmctld."""
    base = {
        "name": consts.CONTROLLER_APP,
        "ports": [{"name": consts.CONTROLLER_APP, "containerPort": consts.SLURMCTLD_PORT, "protocol": "TCP"}],
        "startupProbe": _http_probe(consts.SLURM_LIVEZ, consts.CONTROLLER_APP, thresholds=True),
        "readinessProbe": _http_probe(consts.SLURM_READYZ, consts.CONTROLLER_APP, thresholds=False),
        "livenessProbe": _http_probe(consts.SLURM_LIVEZ, consts.CONTROLLER_APP, thresholds=True),
        "securityContext": {"runAsNonRoot": True, "runAsUser": consts.SLURM_USER_UID,
                            "runAsGroup": consts.SLURM_USER_GID},
        "volumeMounts": [
            {"name": consts.SLURM_ETC_VOLUME, "mountPath": consts.SLURM_ETC_DIR, "readOnly": True},
            {"name": consts.SLURM_PIDFILE_VOLUME, "mountPath": consts.SLURM_PIDFILE_DIR},
            {"name": consts.SLURMCTLD_STATESAVE_VOLUME, "mountPath": cluster_spool_dir(cluster_name)},
            {"name": consts.SLURM_AUTH_SOCKET_VOLUME, "mountPath": consts.SLURMCTLD_AUTH_SOCKET_DIR},
            {"name": consts.SLURM_LOGFILE_VOLUME, "mountPath": consts.SLURM_LOGFILE_DIR},
        ],
    }
    return build_container(base, merge)


def reconfigure_container(merge: Mapping[str, Any] | None) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go reconfigureContainer: the
    "reconfigure" native sidecar (spec.inplaceReconfigure) running `tini -g -- bash -c <scripts.RECONFIGURE>`
    with /etc/slurm and /run/slurmctld read-only; merged with spec.reconfigure."""
    base = {
        "name": "reconfigure",
        "command": ["tini", "-g", "--", "bash", "-c", scripts.RECONFIGURE],
        "restartPolicy": "Always",
        "volumeMounts": [
            {"name": consts.SLURM_ETC_VOLUME, "mountPath": consts.SLURM_ETC_DIR, "readOnly": True},
            {"name": consts.SLURM_AUTH_SOCKET_VOLUME, "mountPath": consts.SLURMCTLD_AUTH_SOCKET_DIR, "readOnly": True},
        ],
    }
    return build_container(base, merge)


def controller_pod_template(
    controller: Mapping[str, Any], hash_annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go controllerPodTemplate.

    `hash_annotations` are the slurm-key/jwt-key (and, without inplaceReconfigure, slurm-config) hashes the
    operator computes from the Secrets and ConfigMap (hashes.controller_hash_annotations); None leaves them
    out. Init containers: reconfigure (when spec.inplaceReconfigure), logfile, then the template's.
    """
    spec = spec_of(controller)
    meta = template_metadata(controller)
    labels = layered(controller.get("metadata", {}).get("labels"), meta.get("labels"), controller_labels(controller))
    annotations = layered(controller.get("metadata", {}).get("annotations"), meta.get("annotations"),
                          hash_annotations, {consts.ANNOTATION_DEFAULT_CONTAINER: consts.CONTROLLER_APP})
    init = []
    if spec.get("inplaceReconfigure"):
        init.append(reconfigure_container(spec.get("reconfigure")))
    init.append(logfile_container(spec.get("logfile"), consts.SLURMCTLD_LOGFILE_PATH))
    base = {
        "automountServiceAccountToken": False,
        "containers": [slurmctld_container(spec.get("slurmctld"), controller_cluster_name(controller))],
        "initContainers": init,
        "securityContext": {"runAsNonRoot": True, "runAsUser": consts.SLURM_USER_UID,
                            "runAsGroup": consts.SLURM_USER_GID, "fsGroup": consts.SLURM_USER_GID},
        "volumes": controller_volumes(controller),
    }
    return build_pod_template(controller_key(controller), namespace_of(controller), labels, annotations, base,
                              template_spec(controller))


def statesave_volume(controller: Mapping[str, Any], ordinal: int = 0) -> tuple[dict[str, Any], bool]:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go BuildController (persistence;
    enabled unless spec.persistence.enabled is false, internal/defaults/controller.go).

    Returns (the pod's statesave volume, whether the StatefulSet controller puts it first): existingClaim -> that
    PVC (appended to the template's volumes); persistence on -> the volumeClaimTemplate's PVC
    `statesave-<name>-controller-<ordinal>` (kubernetes stateful_set_utils.go getPersistentVolumeClaimName;
    updateStorage puts claim volumes first); off -> an emptyDir (appended).
    """
    persistence = spec_of(controller).get("persistence") or {}
    enabled = persistence.get("enabled")
    enabled = consts.DEFAULT_CONTROLLER_PERSISTENCE_ENABLED if enabled is None else bool(enabled)
    name = consts.SLURMCTLD_STATESAVE_VOLUME
    if enabled and persistence.get("existingClaim"):
        return {"name": name, "persistentVolumeClaim": {"claimName": persistence["existingClaim"]}}, False
    if enabled:
        claim = f"{name}-{controller_key(controller)}-{ordinal}"
        return {"name": name, "persistentVolumeClaim": {"claimName": claim}}, True
    return {"name": name, "emptyDir": {}}, False


def controller_pod(controller: Mapping[str, Any], hash_annotations: Mapping[str, str] | None = None) -> PodPlan:
    """The slurmctld pod: `<name>-controller-0` of StatefulSet `<name>-controller` (serviceName the same), so
    hostname `<name>-controller-0` and subdomain `<name>-controller`; labels app.kubernetes.io/name=slurmctld,
    instance=<name>, component=controller (plus the object's and template's)."""
    template = controller_pod_template(controller, hash_annotations)
    volume, first = statesave_volume(controller)
    spec = dict(template["spec"])
    volumes = list(spec.get("volumes") or [])
    spec["volumes"] = [volume, *volumes] if first else [*volumes, volume]
    return statefulset_pod({**template, "spec": spec}, set_name=controller_key(controller),
                           service_name=controller_service_name(controller))
