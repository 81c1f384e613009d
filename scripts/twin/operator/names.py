"""Names the operator derives from its objects: StatefulSets, Deployments, Services, ConfigMaps, Secrets, pods,
hostnames, FQDNs and the Slurm cluster name.

Every function takes the object as the plan gives it (a Kubernetes dict: metadata, spec). Ported from
slurm-operator v1.2.1 api/v1beta1/{controller,accounting,loginset,nodeset,restapi}_keys.go,
internal/utils/domainname/domainname.go, internal/builder/common/common.go (ConfiglessArgs' host,
SlurmClusterWorkerService*, GetSlurmNodeSetName) and internal/controller/nodeset/utils/utils.go (ordinal pod
names, hostnames).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scripts.twin.operator import consts

DEFAULT_CLUSTER_DOMAIN = "cluster.local"


# --- object access -------------------------------------------------------------------------------------------


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def ref_name(ref: Mapping[str, Any] | None) -> str:
    return str((ref or {}).get("name") or "")


# --- domain names --------------------------------------------------------------------------------------------


def cluster_domain(resolv_conf: str | None = None) -> str:
    """slurm-operator v1.2.1 internal/utils/domainname/domainname.go clusterDomain.

    The operator reads its own /etc/resolv.conf: the first `search` domain that starts with "svc." gives the
    rest as the cluster domain; otherwise (no file, no such domain) "cluster.local". Pass the file's text, or
    None for "no file".
    """
    if resolv_conf is None:
        return DEFAULT_CLUSTER_DOMAIN
    for line in resolv_conf.splitlines():
        if not line.startswith("search"):
            continue
        for domain in line.split()[1:]:
            if domain.startswith("svc."):
                return domain[len("svc."):]
    return DEFAULT_CLUSTER_DOMAIN


def fqdn(name: str, namespace: str, domain: str = DEFAULT_CLUSTER_DOMAIN) -> str:
    """slurm-operator v1.2.1 internal/utils/domainname/domainname.go Fqdn: `<name>.<namespace>.svc.<domain>`."""
    return f"{name}.{namespace}.svc.{domain}"


def fqdn_short(name: str, namespace: str) -> str:
    """slurm-operator v1.2.1 internal/utils/domainname/domainname.go FqdnShort: `<name>.<namespace>`."""
    return f"{name}.{namespace}"


# --- Controller ----------------------------------------------------------------------------------------------


def controller_cluster_name(controller: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.ClusterName:
    spec.clusterName, else `<namespace>_<name>`."""
    return str(spec_of(controller).get("clusterName") or "") or f"{namespace_of(controller)}_{name_of(controller)}"


def controller_key(controller: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.Key: the StatefulSet `<name>-controller`.
    Controller.ServiceKey is the same name (the Service)."""
    return f"{name_of(controller)}-controller"


controller_service_name = controller_key


def controller_is_external(controller: Mapping[str, Any]) -> bool:
    return bool(spec_of(controller).get("external"))


def controller_primary_name(controller: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.PrimaryName: `<name>-controller-0`
    (the StatefulSet's only pod), or spec.externalConfig.host for an external controller."""
    if controller_is_external(controller):
        return str((spec_of(controller).get("externalConfig") or {}).get("host") or "")
    return f"{controller_key(controller)}-0"


def controller_service_fqdn_short(controller: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.ServiceFQDNShort."""
    return fqdn_short(controller_service_name(controller), namespace_of(controller))


def controller_service_fqdn(controller: Mapping[str, Any], domain: str = DEFAULT_CLUSTER_DOMAIN) -> str:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.ServiceFQDN."""
    return fqdn(controller_service_name(controller), namespace_of(controller), domain)


def controller_primary_fqdn(controller: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.PrimaryFQDN: `<primary>.<svc>.<ns>`."""
    return f"{controller_primary_name(controller)}.{controller_service_fqdn_short(controller)}"


def controller_config_name(controller: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.ConfigKey: the ConfigMap `<name>-config`
    that holds slurm.conf (and cgroup.conf)."""
    return f"{name_of(controller)}-config"


def controller_slurm_key_ref(controller: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.AuthSlurmRef: spec.slurmKeyRef."""
    ref = spec_of(controller).get("slurmKeyRef") or {}
    return {"name": str(ref.get("name") or ""), "key": str(ref.get("key") or "")}


def controller_jwt_key_ref(controller: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.AuthJwtRef: spec.jwtKeyRef, else the
    deprecated spec.jwtHs256KeyRef, else an empty selector."""
    spec = spec_of(controller)
    ref = spec.get("jwtKeyRef") or spec.get("jwtHs256KeyRef") or {}
    return {"name": str(ref.get("name") or ""), "key": str(ref.get("key") or "")}


def controller_jwks_ref(controller: Mapping[str, Any]) -> dict[str, str] | None:
    """slurm-operator v1.2.1 api/v1beta1/controller_keys.go Controller.AuthJwksRef: spec.jwksKeyRef or None."""
    ref = spec_of(controller).get("jwksKeyRef")
    if ref is None:
        return None
    return {"name": str(ref.get("name") or ""), "key": str(ref.get("key") or "")}


def cluster_spool_dir(cluster_name: str) -> str:
    """slurm-operator v1.2.1 internal/builder/controllerbuilder/controller_app.go clusterSpoolDir:
    StateSaveLocation and the statesave mount, `/var/spool/slurmctld/<clustername>`."""
    return f"{consts.SLURMCTLD_SPOOL_DIR}/{cluster_name}"


def configless_args(controller: Mapping[str, Any]) -> list[str]:
    """slurm-operator v1.2.1 internal/builder/common/common.go ConfiglessArgs:
    `["--conf-server", "<svc>.<ns>:6817"]`, or the external host and port."""
    host = controller_service_fqdn_short(controller)
    port: object = consts.SLURMCTLD_PORT
    if controller_is_external(controller):
        external = spec_of(controller).get("externalConfig") or {}
        host = str(external.get("host") or "")
        port = int(external.get("port") or 0)
    return ["--conf-server", f"{host}:{port}"]


# --- Accounting ----------------------------------------------------------------------------------------------


def accounting_key(accounting: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/accounting_keys.go Accounting.Key (StatefulSet), ServiceKey (Service)
    and ConfigKey (the Secret holding slurmdbd.conf): all `<name>-accounting`."""
    return f"{name_of(accounting)}-accounting"


accounting_service_name = accounting_key
accounting_config_name = accounting_key


def accounting_primary_name(accounting: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/accounting_keys.go Accounting.PrimaryName: `<name>-accounting-0`."""
    return f"{accounting_key(accounting)}-0"


def accounting_service_fqdn_short(accounting: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/accounting_keys.go Accounting.ServiceFQDNShort."""
    return fqdn_short(accounting_service_name(accounting), namespace_of(accounting))


def accounting_storage_password_ref(accounting: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 api/v1beta1/accounting_keys.go Accounting.AuthStorageRef:
    spec.storageConfig.passwordKeyRef (Secret name and key)."""
    ref = (spec_of(accounting).get("storageConfig") or {}).get("passwordKeyRef") or {}
    return {"name": str(ref.get("name") or ""), "key": str(ref.get("key") or "")}


def accounting_slurm_key_ref(accounting: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 api/v1beta1/accounting_keys.go Accounting.AuthSlurmRef."""
    return controller_slurm_key_ref(accounting)


def accounting_jwt_key_ref(accounting: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 api/v1beta1/accounting_keys.go Accounting.AuthJwtRef."""
    return controller_jwt_key_ref(accounting)


def accounting_jwks_ref(accounting: Mapping[str, Any]) -> dict[str, str] | None:
    """slurm-operator v1.2.1 api/v1beta1/accounting_keys.go Accounting.AuthJwksRef."""
    return controller_jwks_ref(accounting)


# --- RestApi -------------------------------------------------------------------------------------------------


def restapi_key(restapi: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/restapi_keys.go RestApi.Key (Deployment) and ServiceKey (Service):
    `<name>-restapi`."""
    return f"{name_of(restapi)}-restapi"


restapi_service_name = restapi_key


def restapi_service_fqdn_short(restapi: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/restapi_keys.go RestApi.ServiceFQDNShort."""
    return fqdn_short(restapi_service_name(restapi), namespace_of(restapi))


# --- LoginSet ------------------------------------------------------------------------------------------------


def loginset_key(loginset: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/loginset_keys.go LoginSet.Key (Deployment) and ServiceKey (Service):
    the LoginSet's own name, with no suffix."""
    return name_of(loginset)


loginset_service_name = loginset_key


def loginset_service_fqdn_short(loginset: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/loginset_keys.go LoginSet.ServiceFQDNShort."""
    return fqdn_short(loginset_service_name(loginset), namespace_of(loginset))


def loginset_ssh_config_name(loginset: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/loginset_keys.go LoginSet.SshConfigKey: `<name>-ssh-config`."""
    return f"{name_of(loginset)}-ssh-config"


def loginset_ssh_host_keys_name(loginset: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/loginset_keys.go LoginSet.SshHostKeys: `<name>-ssh-host-keys`."""
    return f"{loginset_key(loginset)}-ssh-host-keys"


def loginset_sssd_ref(loginset: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 api/v1beta1/loginset_keys.go LoginSet.SssdSecretRef: spec.sssdConfRef."""
    ref = spec_of(loginset).get("sssdConfRef") or {}
    return {"name": str(ref.get("name") or ""), "key": str(ref.get("key") or "")}


# --- NodeSet -------------------------------------------------------------------------------------------------


def nodeset_headless_service_name(nodeset: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/nodeset_keys.go NodeSet.HeadlessServiceKey: `<name>-headless`
    (defined, but v1.2.1's builders use the cluster-wide worker Service instead)."""
    return f"{name_of(nodeset)}-headless"


def nodeset_ssh_config_name(nodeset: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 api/v1beta1/nodeset_keys.go NodeSet.SshConfigKey: `<name>-ssh-config`."""
    return f"{name_of(nodeset)}-ssh-config"


def nodeset_sssd_ref(nodeset: Mapping[str, Any]) -> dict[str, str]:
    """slurm-operator v1.2.1 api/v1beta1/nodeset_keys.go NodeSet.SssdSecretRef: spec.ssh.sssdConfRef."""
    ref = (spec_of(nodeset).get("ssh") or {}).get("sssdConfRef") or {}
    return {"name": str(ref.get("name") or ""), "key": str(ref.get("key") or "")}


def nodeset_controller_name(nodeset: Mapping[str, Any]) -> str:
    """spec.controllerRef.name: the Controller (and the Slurm cluster label) a NodeSet belongs to."""
    return ref_name(spec_of(nodeset).get("controllerRef"))


def nodeset_scaling_mode(nodeset: Mapping[str, Any]) -> str:
    """spec.scalingMode, defaulted to StatefulSet (api/v1beta1/nodeset_types.go kubebuilder default and
    internal/defaults/nodeset.go SetNodeSetDefaults)."""
    return str(spec_of(nodeset).get("scalingMode") or consts.SCALING_MODE_STATEFULSET)


def slurm_nodeset_name(nodeset: Mapping[str, Any]) -> str:
    """slurm-operator v1.2.1 internal/builder/common/common.go GetSlurmNodeSetName.

    The Slurm NodeSet (and Feature, and partition) name: the template's spec.hostname up to its first
    whitespace, with leading and trailing '-' trimmed; else the NodeSet's name. (A hostname of only whitespace
    makes Go index an empty slice and panic: raised here as ValueError.)
    """
    hostname = str(((spec_of(nodeset).get("template") or {}).get("spec") or {}).get("hostname") or "")
    if hostname:
        parts = hostname.split()
        if not parts:
            raise ValueError(f"NodeSet {name_of(nodeset)}: template hostname {hostname!r} has no fields "
                             "(the operator panics: index out of range)")
        return parts[0].strip("-")
    return name_of(nodeset)


def padded_ordinal(nodeset: Mapping[str, Any], ordinal: int) -> str:
    """slurm-operator v1.2.1 internal/controller/nodeset/utils/utils.go GetPaddedOrdinal:
    `fmt.Sprintf("%0<spec.ordinalPadding>d", ordinal)`."""
    padding = int(spec_of(nodeset).get("ordinalPadding") or 0)
    return f"{ordinal:0{padding}d}" if padding > 0 else str(ordinal)


def nodeset_pod_name(nodeset: Mapping[str, Any], ordinal: int) -> str:
    """slurm-operator v1.2.1 internal/controller/nodeset/utils/utils.go GetOrdinalPodName: `<name>-<padded>`."""
    return f"{name_of(nodeset)}-{padded_ordinal(nodeset, ordinal)}"


def daemonset_pod_hostname(node_name: str, hostname_override: str = "") -> str:
    """slurm-operator v1.2.1 internal/controller/nodeset/utils/utils.go GetDaemonSetPodHostname: the override,
    else the Kubernetes node name up to its first '.'."""
    if hostname_override:
        return hostname_override
    return node_name.split(".", 1)[0]


def worker_service_name(controller_name: str) -> str:
    """slurm-operator v1.2.1 internal/builder/common/common.go SlurmClusterWorkerServiceName:
    `slurm-workers-<controller name>`, the headless Service of every NodeSet pod of one cluster."""
    return f"slurm-{consts.WORKER_COMP}s-{controller_name}"


def worker_service_fqdn(controller_name: str, namespace: str, domain: str = DEFAULT_CLUSTER_DOMAIN) -> str:
    """slurm-operator v1.2.1 internal/builder/common/common.go SlurmClusterWorkerService."""
    return fqdn(worker_service_name(controller_name), namespace, domain)


def worker_pdb_name(controller_name: str) -> str:
    """slurm-operator v1.2.1 internal/builder/common/common.go SlurmClusterWorkerPodDisruptionBudgetName."""
    return f"slurm-{consts.WORKER_COMP}s-pdb-{controller_name}"
