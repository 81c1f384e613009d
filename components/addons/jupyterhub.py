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


LDAP_CA_DIR = "/etc/jupyterhub/ldap-ca"  # the directory's CA, from its Secret, on the hub pod
LDAP_CA_VOLUME = "ldap-ca"


def auth_config(config: ClusterConfig, hub: JupyterHub) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """hub.config sections, hub.extraEnv and hub.extraConfig for the identity source (validators jupyterhub-auth,
    jupyterhub-identity)."""
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
            # The person's numeric IDs from the directory, kept in the (encrypted) auth state for the spawn below.
            "auth_state_attributes": ["uidNumber", "gidNumber"],
        }
        if port:
            section["server_port"] = int(port)
        if ldap.allow_groups:
            # By DN (allowed_groups: "List of LDAP group DNs"), each searched with group_search_filter, whose default
            # covers member / uniqueMember (rfc2307bis, AD) and memberUid (rfc2307). Names hold no comma (Ldap).
            section["allowed_groups"] = [f"cn={g},{ldap.group_search_base}" for g in ldap.allow_groups]
        env: dict[str, Any] = {}
        # The server's certificate is verified (ldap3 Tls validate, which defaults to ssl.CERT_NONE: ldap3 2.9.1
        # core/tls.py), against the stack's CA or the image's system CAs; the hub fails closed without a match.
        ca = f", 'ca_certs_file': '{LDAP_CA_DIR}/ca.crt'" if ldap.ca_certificate else ""
        extra: dict[str, str] = {"ldap-tls": "import ssl\nc.LDAPAuthenticator.tls_kwargs = "
                                             f"{{'validate': ssl.CERT_REQUIRED{ca}}}\n"}
        if ldap.bind_dn and ldap.bind_password:
            section["lookup_dn_search_user"] = ldap.bind_dn
            env[LDAP_PASSWORD_ENV] = _secret_env(ldap.bind_password)
            extra["ldap-bind-password"] = (
                f"import os\nc.LDAPAuthenticator.lookup_dn_search_password = os.environ['{LDAP_PASSWORD_ENV}']\n")
        # Every directory user the search and groups admit; who they are on /shared comes from their uidNumber.
        allow = {"allow_all": True, "enable_auth_state": True}
        return ({"JupyterHub": {"authenticator_class": "ldapauthenticator.LDAPAuthenticator"},
                 "LDAPAuthenticator": section, "Authenticator": allow}, env, extra)
    assert hub.oidc is not None  # validator jupyterhub-auth
    oidc = hub.oidc
    # The provider's stable claim -> the declared person (validator jupyterhub-identity); an unknown subject, or one
    # outside the allowed groups, gets no name, which oauthenticator 17.4.0 refuses (oauth2.py user_info_to_username:
    # "if not username: ... raise ValueError").
    mapping = (f"SUBJECTS = {json.dumps(dict(sorted(oidc.users.items())))}\n"
               f"GROUPS = {json.dumps(sorted(oidc.allowed_groups))}\n"
               "def slurm_eks_person(user_info):\n"
               f"    person = SUBJECTS.get(str(user_info.get({oidc.username_claim!r}, '')))\n"
               f"    groups = user_info.get({oidc.groups_claim!r}) or []\n"
               "    if person is None or (GROUPS and not set(groups) & set(GROUPS)):\n"
               "        return None\n"
               "    return person\n"
               "c.GenericOAuthenticator.username_claim = slurm_eks_person\n")
    return ({"JupyterHub": {"authenticator_class": "generic-oauth"},
             "GenericOAuthenticator": {"authorize_url": oidc.authorize_url, "token_url": oidc.token_url,
                                       "userdata_url": oidc.userdata_url, "client_id": oidc.client_id,
                                       "scope": oidc.scope},
             # only the people the stack declares, under the names Slurm knows them by
             "Authenticator": {"allowed_users": sorted(set(oidc.users.values()) & set(identity.users))}},
            {"OAUTH_CLIENT_SECRET": _secret_env(oidc.client_secret)}, {"oidc-identity": mapping})


def user_ids(config: ClusterConfig) -> dict[str, str]:
    """Each notebook runs under its person's own UID and primary GID, so /shared sees them as Slurm does: a declared
    person's from the stack, a directory person's uidNumber/gidNumber from their sign-in. Without one, the spawn
    fails: never the image's default user, whose UID on /shared may be someone's."""
    identity = config.slurm.identity
    if identity.ldap is not None:
        lookup = ("    state = await spawner.user.get_auth_state() or {}\n"
                  "    attributes = state.get('user_attributes') or {}\n"
                  "    ids = [(attributes.get(k) or [None])[0] for k in ('uidNumber', 'gidNumber')]\n")
    else:
        ids = {name: [p.uid, identity.groups[p.groups[0]]] for name, p in identity.users.items()}
        lookup = (f"    ids = {json.dumps(ids, sort_keys=True)}.get(spawner.user.name, [None, None])\n")
    return {"user-ids": ("async def slurm_eks_ids(spawner):\n" + lookup +
                         "    if None in ids or int(ids[0]) < 1000:\n"
                         "        raise ValueError(\n"
                         "            f'{spawner.user.name} has no UID of their own (>= 1000): no notebook')\n"
                         "    spawner.uid, spawner.gid = int(ids[0]), int(ids[1])\n"
                         "c.KubeSpawner.pre_spawn_hook = slurm_eks_ids\n")}


# The AWS cloud provider's service annotations (kubernetes/cloud-provider-aws pkg/providers/v1/aws.go
# ServiceAnnotationLoadBalancerCertificate, ServiceAnnotationLoadBalancerSSLPorts: "ports that will use SSL/HTTPS
# listeners"), which serve NLBs too (aws-load-balancer-type: nlb, as the login Service): the NLB's TLS listener.
NLB_SSL_CERT = "service.beta.kubernetes.io/aws-load-balancer-ssl-cert"
NLB_SSL_PORTS = "service.beta.kubernetes.io/aws-load-balancer-ssl-ports"


def proxy_service(hub: JupyterHub) -> dict[str, Any]:
    if hub.exposure.type == "cluster":
        return {"type": "ClusterIP"}
    annotations = {NLB_TYPE: "nlb", NLB_INTERNAL: "true"}
    tls = hub.exposure.tls
    if tls is not None and tls.certificate_arn:
        annotations |= {NLB_SSL_CERT: tls.certificate_arn, NLB_SSL_PORTS: "https"}
    return {"type": "LoadBalancer", "annotations": annotations,
            "loadBalancerSourceRanges": list(hub.exposure.allowed_cidrs),
            "disableHttpPort": tls is not None}  # with TLS, no plain-HTTP listener at all


def proxy_https(hub: JupyterHub) -> dict[str, Any]:
    """z2jh 4.4.0 proxy.https (templates/proxy/service.yaml): `offload` sends the NLB's 443 to the proxy's HTTP port
    (the NLB decrypts), `secret` has the proxy serve the Secret's certificate itself."""
    tls = hub.exposure.tls
    if hub.exposure.type == "cluster" or tls is None:
        return {"enabled": False}
    if tls.certificate_arn:
        return {"enabled": True, "type": "offload"}
    return {"enabled": True, "type": "secret", "secret": {"name": tls.secret}}


def hub_volumes(config: ClusterConfig) -> dict[str, Any]:
    """The directory's CA on the hub (z2jh hub.extraVolumes / extraVolumeMounts), from its Secret (validator
    jupyterhub-auth: a Kubernetes Secret only)."""
    ldap = config.slurm.identity.ldap
    if ldap is None or ldap.ca_certificate is None:
        return {}
    secret, key = ldap.ca_certificate.removeprefix("k8s:").split("/", 1)
    return {"extraVolumes": [{"name": LDAP_CA_VOLUME, "secret": {"secretName": secret,
                                                                 "items": [{"key": key, "path": "ca.crt"}]}}],
            "extraVolumeMounts": [{"name": LDAP_CA_VOLUME, "mountPath": LDAP_CA_DIR, "readOnly": True}]}


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
            **hub_volumes(config),
        },
        "proxy": {"service": proxy_service(hub), "https": proxy_https(hub),
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
