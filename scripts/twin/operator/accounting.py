"""The Accounting's pod (slurmdbd) as the operator's StatefulSet `<name>-accounting` runs it.

Port of slurm-operator v1.2.1 internal/builder/accountingbuilder/accounting_app.go (BuildAccounting,
accountingPodTemplate, accountingVolumes, slurmdbdContainer).

slurmdbd gets no command or args from the operator; /etc/slurm is projected (0o600): slurmdbd.conf from the
`<name>-accounting` Secret (slurmdbd.py renders it), slurm.key, jwt.key and jwks.json when set. Unlike the other
builders, the pod template does NOT take spec.template.metadata (labels and annotations): only the object's
own and the operator's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.common import (
    jwks_projection,
    layered,
    pidfile_volume,
    secret_projection,
    statefulset_pod,
    template_spec,
)
from scripts.twin.operator.labels import accounting_labels
from scripts.twin.operator.merge import build_container, build_pod_template
from scripts.twin.operator.model import PodPlan
from scripts.twin.operator.names import (
    accounting_config_name,
    accounting_jwks_ref,
    accounting_jwt_key_ref,
    accounting_key,
    accounting_service_name,
    accounting_slurm_key_ref,
    namespace_of,
    spec_of,
)


def accounting_volumes(accounting: Mapping[str, Any]) -> list[dict[str, Any]]:
    """slurm-operator v1.2.1 internal/builder/accountingbuilder/accounting_app.go accountingVolumes."""
    sources: list[dict[str, Any]] = [
        {"secret": {"name": accounting_config_name(accounting),
                    "items": [{"key": consts.SLURMDBD_CONF_FILE, "path": consts.SLURMDBD_CONF_FILE}]}},
        secret_projection(accounting_slurm_key_ref(accounting), consts.SLURM_KEY_FILE),
        secret_projection(accounting_jwt_key_ref(accounting), consts.JWT_KEY_FILE),
    ]
    jwks = accounting_jwks_ref(accounting)
    if jwks is not None:
        sources.append(jwks_projection(jwks))
    return [{"name": consts.SLURM_ETC_VOLUME, "projected": {"defaultMode": 0o600, "sources": sources}},
            pidfile_volume()]


def slurmdbd_container(merge: Mapping[str, Any] | None) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/accountingbuilder/accounting_app.go slurmdbdContainer: port
    slurmdbd 6819, a TCP readiness probe on it, runs as 401:401, /etc/slurm (ro) and /run; merged with
    spec.slurmdbd."""
    base = {
        "name": consts.ACCOUNTING_APP,
        "ports": [{"name": consts.ACCOUNTING_APP, "containerPort": consts.SLURMDBD_PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": consts.SLURMDBD_PORT}},
        "securityContext": {"runAsNonRoot": True, "runAsUser": consts.SLURM_USER_UID,
                            "runAsGroup": consts.SLURM_USER_GID},
        "volumeMounts": [
            {"name": consts.SLURM_ETC_VOLUME, "mountPath": consts.SLURM_ETC_DIR, "readOnly": True},
            {"name": consts.SLURM_PIDFILE_VOLUME, "mountPath": consts.SLURM_PIDFILE_DIR},
        ],
    }
    return build_container(base, merge)


def accounting_pod_template(
    accounting: Mapping[str, Any], hash_annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/accountingbuilder/accounting_app.go accountingPodTemplate
    (`hash_annotations`: hashes.accounting_hash_annotations, or None)."""
    meta = accounting.get("metadata") or {}
    labels = layered(meta.get("labels"), accounting_labels(accounting))
    annotations = layered(meta.get("annotations"), hash_annotations,
                          {consts.ANNOTATION_DEFAULT_CONTAINER: consts.ACCOUNTING_APP})
    base = {
        "automountServiceAccountToken": False,
        "containers": [slurmdbd_container(spec_of(accounting).get("slurmdbd"))],
        "securityContext": {"runAsNonRoot": True, "runAsUser": consts.SLURM_USER_UID,
                            "runAsGroup": consts.SLURM_USER_GID, "fsGroup": consts.SLURM_USER_GID},
        "volumes": accounting_volumes(accounting),
    }
    return build_pod_template(accounting_key(accounting), namespace_of(accounting), labels, annotations, base,
                              template_spec(accounting))


def accounting_pod(accounting: Mapping[str, Any], hash_annotations: Mapping[str, str] | None = None) -> PodPlan:
    """The slurmdbd pod: `<name>-accounting-0` of StatefulSet `<name>-accounting` (serviceName the same), so
    hostname `<name>-accounting-0` (slurmdbd.conf's DbdHost) and subdomain `<name>-accounting`."""
    return statefulset_pod(accounting_pod_template(accounting, hash_annotations),
                           set_name=accounting_key(accounting), service_name=accounting_service_name(accounting))
