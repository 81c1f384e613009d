"""RestApi pods (slurmrestd) as the operator's Deployment `<name>-restapi` runs them.

Port of slurm-operator v1.2.1 internal/builder/restapibuilder/restapi_app.go (BuildRestapi,
restapiPodTemplate, restapiVolumes, slurmrestdContainer, slurmrestdArgs).

slurmrestd runs as nobody (65534) with SLURM_JWT=daemon (it authenticates to slurmctld with slurm.key and
accepts users' JWTs) and SLURMRESTD_SECURITY=disable_unshare_files,disable_unshare_sysv; its args end with the
listen address 0.0.0.0:6820, after `-s openapi/slurmctld` when the Controller has no accountingRef and after
the user's spec.slurmrestd.args. /etc/slurm holds the Controller's slurm.conf and slurm.key only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.common import deployment_pod, layered, secret_projection, template_metadata, template_spec
from scripts.twin.operator.labels import restapi_labels
from scripts.twin.operator.merge import build_container, build_pod_template
from scripts.twin.operator.model import PodPlan
from scripts.twin.operator.names import (
    controller_config_name,
    controller_slurm_key_ref,
    namespace_of,
    restapi_key,
    spec_of,
)

LISTEN_ADDRESS = f"0.0.0.0:{consts.SLURMRESTD_PORT}"
"""slurm-operator v1.2.1 internal/builder/restapibuilder/restapi_app.go slurmrestdContainer: the last arg."""


def slurmrestd_args(has_accounting: bool) -> list[str]:
    """slurm-operator v1.2.1 internal/builder/restapibuilder/restapi_app.go slurmrestdArgs: `-s
    openapi/slurmctld` without accounting (no slurmdbd plugin), else nothing."""
    return [] if has_accounting else ["-s", "openapi/slurmctld"]


def restapi_volumes(controller: Mapping[str, Any]) -> list[dict[str, Any]]:
    """slurm-operator v1.2.1 internal/builder/restapibuilder/restapi_app.go restapiVolumes: slurm-etc
    (projected, 0o600): slurm.conf from `<controller>-config`, slurm.key."""
    return [{"name": consts.SLURM_ETC_VOLUME, "projected": {"defaultMode": 0o600, "sources": [
        {"configMap": {"name": controller_config_name(controller),
                       "items": [{"key": consts.SLURM_CONF_FILE, "path": consts.SLURM_CONF_FILE}]}},
        secret_projection(controller_slurm_key_ref(controller), consts.SLURM_KEY_FILE),
    ]}}]


def slurmrestd_container(merge: Mapping[str, Any] | None, has_accounting: bool) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/restapibuilder/restapi_app.go slurmrestdContainer: port slurmrestd
    6820, TCP probes on 6820, runs as 65534:65534, /etc/slurm read-only; merged with spec.slurmrestd, then the
    listen address appended to the args."""
    tcp = {"tcpSocket": {"port": consts.SLURMRESTD_PORT}}
    base: dict[str, Any] = {
        "name": consts.RESTAPI_APP,
        "env": [{"name": "SLURM_JWT", "value": "daemon"},
                {"name": "SLURMRESTD_SECURITY", "value": "disable_unshare_files,disable_unshare_sysv"}],
        "args": slurmrestd_args(has_accounting),
        "ports": [{"name": consts.RESTAPI_APP, "containerPort": consts.SLURMRESTD_PORT, "protocol": "TCP"}],
        "startupProbe": {**tcp, "failureThreshold": 6, "periodSeconds": 10},
        "livenessProbe": {**tcp, "failureThreshold": 6, "periodSeconds": 10},
        "readinessProbe": dict(tcp),
        "securityContext": {"runAsNonRoot": True, "runAsUser": consts.SLURMRESTD_USER_UID,
                            "runAsGroup": consts.SLURMRESTD_USER_GID},
        "volumeMounts": [{"name": consts.SLURM_ETC_VOLUME, "mountPath": consts.SLURM_ETC_DIR, "readOnly": True}],
    }
    out = build_container(base, merge)
    out["args"] = [*(out.get("args") or []), LISTEN_ADDRESS]
    return out


def restapi_pod_template(restapi: Mapping[str, Any], controller: Mapping[str, Any]) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/restapibuilder/restapi_app.go restapiPodTemplate (`controller` is the
    one spec.controllerRef names; its accountingRef decides slurmrestd's plugins). Pod runs as 65534 with
    fsGroup 65534."""
    meta = template_metadata(restapi)
    labels = layered(restapi.get("metadata", {}).get("labels"), meta.get("labels"), restapi_labels(restapi))
    annotations = layered(restapi.get("metadata", {}).get("annotations"), meta.get("annotations"),
                          {consts.ANNOTATION_DEFAULT_CONTAINER: consts.RESTAPI_APP})
    has_accounting = spec_of(controller).get("accountingRef") is not None
    base = {
        "automountServiceAccountToken": False,
        "containers": [slurmrestd_container(spec_of(restapi).get("slurmrestd"), has_accounting)],
        "securityContext": {"runAsNonRoot": True, "runAsUser": consts.SLURMRESTD_USER_UID,
                            "runAsGroup": consts.SLURMRESTD_USER_GID, "fsGroup": consts.SLURMRESTD_USER_GID},
        "volumes": restapi_volumes(controller),
    }
    return build_pod_template(restapi_key(restapi), namespace_of(restapi), labels, annotations, base,
                              template_spec(restapi))


def restapi_pods(restapi: Mapping[str, Any], controller: Mapping[str, Any]) -> list[PodPlan]:
    """The RestApi's pods: spec.replicas (default 1, internal/defaults/restapi.go) replicas of Deployment
    `<name>-restapi`, named `<name>-restapi-<i>` by the twin (common.deployment_pod)."""
    replicas = spec_of(restapi).get("replicas")
    count = consts.DEFAULT_RESTAPI_REPLICAS if replicas is None else int(replicas)
    template = restapi_pod_template(restapi, controller)
    return [deployment_pod(template, deployment_name=restapi_key(restapi), replica=i) for i in range(count)]
