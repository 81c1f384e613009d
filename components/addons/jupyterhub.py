"""JupyterHub from the zero-to-jupyterhub chart: the hub and proxy on the system nodes, one notebook server per
person on a `kubernetesPools` pool, chosen from KubeSpawner profiles (`addons.jupyterhub.profiles`), with
/shared (FSx) and the models (EFS, read-only) mounted and the Slurm REST client (slurm/rest_client.py) beside.

Values are the chart's (jupyterhub/zero-to-jupyterhub-k8s 4.4.0 jupyterhub/values.yaml); its hub turns them
into KubeSpawner traits in jupyterhub/files/hub/jupyterhub_config.py: singleuser.profileList -> profile_list,
singleuser.storage.extraVolumes/extraVolumeMounts -> volumes/volume_mounts, hub.config.<Class> passed through.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

import slurm.rest_client as rest_client
from components import catalog
from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.compute.nodepools import pool_scheduling
from components.compute.scheduling import DEVICE_RESOURCES, partition_instance
from components.config.cluster import ClusterConfig
from components.config.efs import model_volume
from components.config.jupyterhub import JupyterHub
from components.kubernetes.charts import Chart, release
from components.kubernetes.namespaces import JUPYTERHUB, RESTRICTED_CONTAINER, RESTRICTED_POD, Namespaces
from components.names import SHARED_MOUNT, SHARED_PVC, SHARED_VOLUME_NAME, SLURM_NAMESPACE
from components.slinky.ports import SLURMRESTD
from components.slinky.specs import CONTROLLER, NLB_INTERNAL, NLB_TYPE
from components.storage.efs import ModelStorage
from components.storage.fsx import SharedStorage

CHART = Chart("jupyterhub", "4.4.0", JUPYTERHUB, "https://hub.jupyter.org/helm-chart/")
# The notebooks get the REST client module as a file (a ConfigMap); imported here so the dependency shows.
CLIENT_SOURCE = Path(rest_client.__file__)
CLIENT_DIR = "/opt/slurm-eks"  # on the notebooks' PYTHONPATH: `from rest_client import SlurmRest`
# slurm-operator v1.2.1 api/v1beta1/restapi_keys.go ServiceKey: <RestApi name>-restapi, port 6820.
SLURMRESTD_URL = f"http://{CONTROLLER}-restapi.{SLURM_NAMESPACE}.svc.cluster.local:{SLURMRESTD}"
# A notebook takes its share of a node less this much, leaving room for the node's DaemonSets.
NODE_SHARE = 0.9
LDAP_PASSWORD_ENV = "LDAP_BIND_PASSWORD"


def _secret_env(ref: str) -> dict[str, Any]:
    """k8s:<secret>/<key> as a z2jh extraEnv entry (a Secret of the jupyterhub namespace)."""
    secret, key = ref.removeprefix("k8s:").split("/", 1)
    return {"valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def profile_list(config: ClusterConfig, hub: JupyterHub) -> list[dict[str, Any]]:
    """KubeSpawner profile_list: per profile its pool's node selector and tolerations, its devices as extra
    resource limits and a matching share of the node's CPU and memory."""
    profiles = []
    for slug, p in hub.profiles.items():
        pool = config.kubernetes_pools[p.pool]
        node = partition_instance(pool)
        share = p.devices / node.accelerators
        room = catalog.allocatable(node)
        cpu = round(room.cpu_millis * share * NODE_SHARE / 1000, 1)
        memory = f"{int(room.memory_mib * share * NODE_SHARE)}M"
        device = {DEVICE_RESOURCES[node.accelerator]: str(p.devices)}
        scheduling = pool_scheduling(p.pool, pool)
        profiles.append({
            "display_name": p.display_name or f"{p.devices} x {node.accelerator_model} ({p.pool})",
            "slug": slug,
            "description": f"{p.devices} of {node.accelerators} {node.accelerator_model} on a {node.name}, "
                           f"{cpu} CPUs, {memory} memory",
            "default": p.default,
            "kubespawner_override": {
                "node_selector": scheduling["nodeSelector"],
                "tolerations": scheduling["tolerations"],
                "extra_resource_limits": device,
                "extra_resource_guarantees": device,
                "cpu_guarantee": cpu, "cpu_limit": cpu, "mem_guarantee": memory, "mem_limit": memory,
            },
        })
    return profiles


def auth_config(config: ClusterConfig, hub: JupyterHub) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """hub.config sections, hub.extraEnv and hub.extraConfig for the identity source (validator jupyterhub-auth)."""
    identity = config.slurm.identity
    if identity.ldap is not None:
        ldap = identity.ldap
        # jupyterhub/ldapauthenticator 2.0.2 ldapauthenticator.py traits; ldaps:// is TLS on connect.
        host, _, port = ldap.uri.split("://", 1)[1].partition(":")
        section: dict[str, Any] = {
            "server_address": host, "tls_strategy": "on_connect" if ldap.uri.startswith("ldaps") else "before_bind",
            "lookup_dn": True, "user_search_base": ldap.base_dn,
            "user_attribute": "sAMAccountName" if ldap.schema_ == "ad" else "uid",
            "lookup_dn_user_dn_attribute": "cn",
        }
        if port:
            section["server_port"] = int(port)
        env: dict[str, Any] = {}
        extra: dict[str, str] = {}
        if ldap.bind_dn and ldap.bind_password:
            section["lookup_dn_search_user"] = ldap.bind_dn
            env[LDAP_PASSWORD_ENV] = _secret_env(ldap.bind_password)
            extra["ldap-bind-password"] = (
                f"import os\nc.LDAPAuthenticator.lookup_dn_search_password = os.environ['{LDAP_PASSWORD_ENV}']\n")
        allow = {"allow_all": True}  # sssd's allowGroups are names, LDAPAuthenticator's allowed_groups are DNs
        return ({"JupyterHub": {"authenticator_class": "ldapauthenticator.LDAPAuthenticator"},
                 "LDAPAuthenticator": section, "Authenticator": allow}, env, extra)
    assert hub.oidc is not None  # validator jupyterhub-auth
    oidc = hub.oidc
    return ({"JupyterHub": {"authenticator_class": "generic-oauth"},
             "GenericOAuthenticator": {"authorize_url": oidc.authorize_url, "token_url": oidc.token_url,
                                       "userdata_url": oidc.userdata_url, "client_id": oidc.client_id,
                                       "username_claim": oidc.username_claim, "scope": oidc.scope},
             # only the people the stack declares, under the names Slurm knows them by
             "Authenticator": {"allowed_users": sorted(identity.users)}},
            {"OAUTH_CLIENT_SECRET": _secret_env(oidc.client_secret)}, {})


def user_ids(config: ClusterConfig) -> dict[str, str]:
    """Declared people's notebooks run under their own UID and primary GID, so /shared sees them as on Slurm;
    a directory's UIDs are not known here, and its people run as the image's user."""
    identity = config.slurm.identity
    if not identity.users:
        return {}
    ids = {name: [p.uid, identity.groups[p.groups[0]]] for name, p in identity.users.items()}
    return {"user-ids": (f"IDS = {json.dumps(ids, sort_keys=True)}\n"
                         "c.KubeSpawner.uid = lambda spawner: IDS.get(spawner.user.name, [1000, 100])[0]\n"
                         "c.KubeSpawner.gid = lambda spawner: IDS.get(spawner.user.name, [1000, 100])[1]\n")}


def proxy_service(hub: JupyterHub) -> dict[str, Any]:
    if hub.exposure.type == "cluster":
        return {"type": "ClusterIP"}
    return {"type": "LoadBalancer", "annotations": {NLB_TYPE: "nlb", NLB_INTERNAL: "true"},
            "loadBalancerSourceRanges": list(hub.exposure.allowed_cidrs)}


def chart_values(config: ClusterConfig, hub: JupyterHub, hub_storage_class: pulumi.Input[str] | None = None
                 ) -> dict[str, Any]:
    sections, env, extra = auth_config(config, hub)
    model_volumes, model_mounts = model_volume(config.storage.efs)
    image, _, tag = hub.image.rpartition(":")
    return {
        "hub": {
            "nodeSelector": SYSTEM_NODE_SELECTOR,
            "config": {**sections,
                       # restricted Pod Security for notebooks (KubeSpawner 7.0.0 spawner.py traits)
                       "KubeSpawner": {"pod_security_context": RESTRICTED_POD,
                                       "container_security_context": {**RESTRICTED_CONTAINER, "runAsNonRoot": True}}},
            "extraEnv": env,
            "extraConfig": {**extra, **user_ids(config)},
            "db": {"type": "sqlite-pvc", "pvc": {"storageClassName": hub_storage_class}},
            # our NetworkPolicies (components/segmentation/network_policies.py jupyterhub_policies) replace the chart's
            "networkPolicy": {"enabled": False},
        },
        "proxy": {"service": proxy_service(hub),
                  "chp": {"nodeSelector": SYSTEM_NODE_SELECTOR, "networkPolicy": {"enabled": False}}},
        "singleuser": {
            "image": {"name": image, "tag": tag},
            "profileList": profile_list(config, hub),
            # a privileged iptables init container otherwise; NetworkPolicies and hop limit 1 keep IMDS away
            "cloudMetadata": {"blockWithIptables": False},
            "networkPolicy": {"enabled": False},
            "storage": {
                "type": "none",  # homes live on /shared
                "extraVolumes": [{"name": SHARED_VOLUME_NAME, "persistentVolumeClaim": {"claimName": SHARED_PVC}},
                                 *model_volumes],
                "extraVolumeMounts": [{"name": SHARED_VOLUME_NAME, "mountPath": SHARED_MOUNT}, *model_mounts],
            },
            "extraFiles": {"slurm-rest-client": {"mountPath": f"{CLIENT_DIR}/rest_client.py", "mode": 0o444,
                                                 "stringData": CLIENT_SOURCE.read_text()}},
            "extraEnv": {"PYTHONPATH": CLIENT_DIR, "SLURMRESTD_URL": SLURMRESTD_URL},
        },
        # user-scheduler, placeholders and image pullers would run on the accelerator pools or as extra
        # schedulers: Karpenter brings a pool's node up for the notebook itself
        "scheduling": {"userScheduler": {"enabled": False}, "userPlaceholder": {"enabled": False}},
        "prePuller": {"hook": {"enabled": False}, "continuous": {"enabled": False}},
    }


@dataclass(frozen=True)
class JupyterHubArgs:
    config: ClusterConfig
    namespaces: Namespaces
    provider: k8s.Provider
    storage: SharedStorage
    models: ModelStorage | None  # None without storage.efs
    hub_storage_class: pulumi.Input[str]


class JupyterHubRelease(pulumi.ComponentResource):
    def __init__(self, name: str, args: JupyterHubArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:JupyterHub", name, None, opts)
        hub = args.config.addons.jupyterhub
        assert hub is not None
        namespace = args.namespaces.create(f"{name}-namespace", JUPYTERHUB, self)
        claims = [*args.storage.claim_in(JUPYTERHUB, namespace),
                  *(args.models.claim_in(JUPYTERHUB, namespace) if args.models is not None else [])]
        self.release = release(name, CHART, chart_values(args.config, hub, args.hub_storage_class), args.provider,
                               self, namespace, claims)
        self.register_outputs({})
