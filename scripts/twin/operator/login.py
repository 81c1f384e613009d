"""LoginSet pods (sackd + sshd) and the sshd_config/authorized_keys ConfigMap the operator writes for them.

Ports of slurm-operator v1.2.1 internal/builder/loginbuilder/login_app.go (BuildLogin, loginPodTemplate,
loginVolumes, loginContainer) and login_config.go (BuildLoginSshConfig, buildAuthorizedKeys, buildSshdConfig),
and internal/builder/workerbuilder/worker_config.go buildWorkerSshdConfig (a NodeSet's sshd_config).

The login container gets no command or args: the image runs sackd with SACKD_OPTIONS
(`--conf-server <controller svc>.<ns>:6817`) and sshd. Its /etc/slurm is an emptyDir the initconf init
container fills from the slurm-config projection (slurm.key only).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts
from scripts.twin.operator.common import (
    deployment_pod,
    etc_slurm_volume,
    initconf_container,
    layered,
    secret_projection,
    template_metadata,
    template_spec,
)
from scripts.twin.operator.confbuilder import build_config, prop, raw
from scripts.twin.operator.labels import login_labels
from scripts.twin.operator.merge import build_container, build_pod_template
from scripts.twin.operator.model import PodPlan
from scripts.twin.operator.names import (
    configless_args,
    controller_slurm_key_ref,
    loginset_key,
    loginset_ssh_config_name,
    loginset_ssh_host_keys_name,
    loginset_sssd_ref,
    namespace_of,
    ref_name,
    spec_of,
    worker_service_fqdn,
)

_HOST_KEYS = (consts.SSH_HOST_RSA_KEY_FILE, consts.SSH_HOST_ED25519_KEY_FILE, consts.SSH_HOST_ECDSA_KEY_FILE)


def sackd_options(controller: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_app.go loginContainer: SACKD_OPTIONS, the
    ConfiglessArgs joined by a space."""
    return " ".join(configless_args(controller))


def build_authorized_keys(authorized_keys: str) -> str:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_config.go buildAuthorizedKeys (root's
    authorized_keys from spec.rootSshAuthorizedKeys)."""
    return build_config([raw("#"), raw("### SLINKY ###"), raw(authorized_keys)])


def build_sshd_config(extra_conf: str) -> str:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_config.go buildSshdConfig (spec.extraSshdConfig
    appended under EXTRA CONFIG)."""
    return build_config([
        raw("#"), raw("### GENERAL ###"),
        prop("Include", "/etc/ssh/sshd_config.d/*.conf"),
        prop("UsePAM", "yes"),
        prop("X11Forwarding", "yes"),
        prop("Subsystem", "sftp internal-sftp"),
        raw("#"), raw("### EXTRA CONFIG ###"),
        raw(extra_conf),
    ], sep=" ")


def build_worker_sshd_config(extra_conf: str) -> str:
    """slurm-operator v1.2.1 internal/builder/workerbuilder/worker_config.go buildWorkerSshdConfig (a NodeSet's
    sshd_config with spec.ssh.enabled)."""
    return build_config([
        raw("#"), raw("### GENERAL ###"),
        prop("Include", "/etc/ssh/sshd_config.d/*.conf"),
        prop("UsePAM", "yes"),
        prop("Subsystem", "sftp internal-sftp"),
        prop("AuthenticationMethods", "publickey password"),
        raw("#"), raw("### EXTRA CONFIG ###"),
        raw(extra_conf),
    ], sep=" ")


def login_ssh_config_data(loginset: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_config.go BuildLoginSshConfig: the data of the
    `<name>-ssh-config` ConfigMap (authorized_keys, sshd_config)."""
    spec = spec_of(loginset)
    return {
        consts.AUTHORIZED_KEYS_FILE: build_authorized_keys(str(spec.get("rootSshAuthorizedKeys") or "")),
        consts.SSHD_CONFIG_FILE: build_sshd_config(str(spec.get("extraSshdConfig") or "")),
    }


def login_volumes(loginset: Mapping[str, Any], controller: Mapping[str, Any]) -> list[dict[str, Any]]:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_app.go loginVolumes: slurm-etc (emptyDir),
    sackd-dir (emptyDir), slurm-config (projected 0o600: slurm.key), ssh-host-keys (the `<name>-ssh-host-keys`
    Secret the operator generates), ssh-config (`<name>-ssh-config`: sshd_config, authorized_keys), sssd-conf
    (spec.sssdConfRef as sssd.conf)."""
    sssd = loginset_sssd_ref(loginset)
    host_key_items = []
    for key in _HOST_KEYS:
        host_key_items += [{"key": key, "path": key, "mode": 0o600}, {"key": f"{key}.pub", "path": f"{key}.pub",
                                                                       "mode": 0o644}]

    def projected(source: dict[str, Any]) -> dict[str, Any]:
        return {"defaultMode": 0o600, "sources": [source]}

    return [
        etc_slurm_volume(),
        {"name": consts.SACKD_VOLUME, "emptyDir": {"medium": "Memory"}},
        {"name": consts.SLURM_CONFIG_VOLUME, "projected": projected(
            secret_projection(controller_slurm_key_ref(controller), consts.SLURM_KEY_FILE))},
        {"name": consts.SSH_HOST_KEYS_VOLUME, "projected": projected(
            {"secret": {"name": loginset_ssh_host_keys_name(loginset), "items": host_key_items}})},
        {"name": consts.SSH_CONFIG_VOLUME, "projected": projected({"configMap": {
            "name": loginset_ssh_config_name(loginset),
            "items": [{"key": consts.SSHD_CONFIG_FILE, "path": consts.SSHD_CONFIG_FILE, "mode": 0o600},
                      {"key": consts.AUTHORIZED_KEYS_FILE, "path": consts.AUTHORIZED_KEYS_FILE, "mode": 0o600}]}})},
        {"name": consts.SSSD_CONF_VOLUME, "projected": projected({"secret": {
            "name": sssd["name"], "items": [{"key": sssd["key"], "path": consts.SSSD_CONF_FILE, "mode": 0o600}]}})},
    ]


def login_container(merge: Mapping[str, Any] | None, controller: Mapping[str, Any]) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_app.go loginContainer.

    Env SACKD_OPTIONS; port "login" 22 (or the containerPort of the user's port named "login"); readiness
    `test -S /run/slurm/sack.socket`; mounts /etc/slurm (ro), /run/slurm (sackd), the six ssh host keys,
    sshd_config, /root/.ssh/authorized_keys and /etc/sssd/sssd.conf; merged with spec.login.
    """
    ssh_port = consts.LOGIN_PORT
    for port in (merge or {}).get("ports") or ():
        if port.get("name") == consts.LOGIN_APP and port.get("containerPort"):
            ssh_port = int(port["containerPort"])
    mounts: list[dict[str, Any]] = [
        {"name": consts.SLURM_ETC_VOLUME, "mountPath": consts.SLURM_ETC_DIR, "readOnly": True},
        {"name": consts.SACKD_VOLUME, "mountPath": consts.SACKD_DIR},
    ]
    for key in _HOST_KEYS:
        for file in (key, f"{key}.pub"):
            mounts.append({"name": consts.SSH_HOST_KEYS_VOLUME, "mountPath": f"{consts.SSH_DIR}/{file}",
                           "subPath": file, "readOnly": True})
    mounts += [
        {"name": consts.SSH_CONFIG_VOLUME, "mountPath": consts.SSHD_CONFIG_FILE_PATH,
         "subPath": consts.SSHD_CONFIG_FILE, "readOnly": True},
        {"name": consts.SSH_CONFIG_VOLUME, "mountPath": consts.ROOT_AUTHORIZED_KEYS_FILE_PATH,
         "subPath": consts.AUTHORIZED_KEYS_FILE, "readOnly": True},
        {"name": consts.SSSD_CONF_VOLUME, "mountPath": consts.SSSD_CONF_FILE_PATH,
         "subPath": consts.SSSD_CONF_FILE, "readOnly": True},
    ]
    base = {
        "name": consts.LOGIN_APP,
        "env": [{"name": "SACKD_OPTIONS", "value": sackd_options(controller)}],
        "ports": [{"name": consts.LOGIN_APP, "containerPort": ssh_port, "protocol": "TCP"}],
        "readinessProbe": {"exec": {"command": ["test", "-S", consts.SACKD_SOCKET_PATH]}},
        "volumeMounts": mounts,
    }
    return build_container(base, merge)


def login_pod_template(
    loginset: Mapping[str, Any], controller: Mapping[str, Any], hash_annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/loginbuilder/login_app.go loginPodTemplate.

    `controller` is the Controller spec.controllerRef names. DNS search `slurm-workers-<controller>.<ns>.svc.
    cluster.local` (so `ssh <slurm node>` and srun resolve NodeSet pods); initconf then the template's init
    containers. `hash_annotations`: hashes.login_hash_annotations, or None.
    """
    spec = spec_of(loginset)
    meta = template_metadata(loginset)
    labels = layered(loginset.get("metadata", {}).get("labels"), meta.get("labels"), login_labels(loginset))
    annotations = layered(loginset.get("metadata", {}).get("annotations"), meta.get("annotations"),
                          hash_annotations, {consts.ANNOTATION_DEFAULT_CONTAINER: consts.LOGIN_APP})
    base = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [login_container(spec.get("login"), controller)],
        "initContainers": [initconf_container(spec.get("initconf"))],
        "dnsConfig": {"searches": [worker_service_fqdn(ref_name(spec.get("controllerRef")), namespace_of(loginset))]},
        "volumes": login_volumes(loginset, controller),
    }
    return build_pod_template(loginset_key(loginset), namespace_of(loginset), labels, annotations, base,
                              template_spec(loginset))


def login_pods(
    loginset: Mapping[str, Any], controller: Mapping[str, Any], hash_annotations: Mapping[str, str] | None = None
) -> list[PodPlan]:
    """The LoginSet's pods: spec.replicas (default 1, internal/defaults/loginset.go) replicas of Deployment
    `<loginset name>`, named `<loginset name>-<i>` by the twin (common.deployment_pod)."""
    replicas = spec_of(loginset).get("replicas")
    count = consts.DEFAULT_LOGINSET_REPLICAS if replicas is None else int(replicas)
    template = login_pod_template(loginset, controller, hash_annotations)
    return [deployment_pod(template, deployment_name=loginset_key(loginset), replica=i) for i in range(count)]
