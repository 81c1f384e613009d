"""The `spec` of each Slinky object, built from the config. Field names follow the v1beta1 CRDs in
../shared/crds/slinky; container and pod template fields are Kubernetes' own (the CRDs keep them opaque,
so tests validate them as a Pod)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.catalog import Resources
from components.compute.scheduling import (
    device_requests,
    node_labels,
    node_taints,
    partition_efa_interfaces,
    partition_instance,
    tolerations_for,
)
from components.config.cluster import ClusterConfig
from components.config.efs import model_volume
from components.names import LOGIN_NODE_SELECTOR, LOGIN_TAINT, SHARED_MOUNT, SHARED_PVC, SHARED_VOLUME_NAME
from components.slinky import identity, node_health, slurm_conf
from components.slinky.health_settings import health_slurm_conf
from components.slinky.images import slurm_image, training_image
from components.slinky.job_aws import nodeset_additions
from components.slinky.lifecycle_settings import places_topology
from components.slinky.sizing import LOGFILE, slurmd_resources

API_VERSION = "slinky.slurm.net/v1beta1"
CONTROLLER = "slurm"  # the Controller and Accounting objects; also Slurm's ClusterName prefix
STATE_SIZE = "16Gi"
SHARED_VOLUME = {"name": SHARED_VOLUME_NAME, "persistentVolumeClaim": {"claimName": SHARED_PVC}}
SHARED_VOLUME_MOUNT = {"name": SHARED_VOLUME_NAME, "mountPath": SHARED_MOUNT}
# NCCL and PyTorch data loaders exchange tensors through /dev/shm; the container default is 64 MiB.
SHM_VOLUME = {"name": "shm", "emptyDir": {"medium": "Memory"}}
SHM_VOLUME_MOUNT = {"name": "shm", "mountPath": "/dev/shm"}
PARTITIONS_FILE = "/etc/slurm-eks/partitions.json"
METRICS_ENDPOINTS = ["/metrics/partitions", "/metrics/nodes", "/metrics/jobs", "/metrics/scheduler"]
IDENTITY_CONFIG_MAP = "slurm-identity"  # the declared people (components/slinky/identity.py account_files)
NLB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
NLB_INTERNAL = "service.beta.kubernetes.io/aws-load-balancer-internal"


# The init container that adds the declared people to a pod: a shell script over a few small files.
IDENTITY_SETUP = Resources(100, 64)


def guaranteed(resources: Resources, extra: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """requests == limits, the Guaranteed QoS class: under node memory pressure the kubelet evicts every
    BestEffort and Burstable pod first."""
    cpu, memory = resources.cpu_millis, resources.memory_mib
    amounts = {"cpu": f"{cpu // 1000}" if cpu % 1000 == 0 else f"{cpu}m",
               "memory": f"{memory // 1024}Gi" if memory % 1024 == 0 else f"{memory}Mi", **(extra or {})}
    return {"requests": amounts, "limits": dict(amounts)}


def logfile_sidecar(image: str) -> dict[str, Any]:
    """Slinky v1.2.1 adds a `logfile` sidecar to slurmctld and slurmd pods but gives it no image (its Helm
    chart sets a floating alpine:latest): the daemon's own image has the shell tools it runs."""
    return {"image": image, "resources": guaranteed(LOGFILE)}


@dataclass(frozen=True)
class SecretKey:
    name: str
    key: str

    @property
    def ref(self) -> dict[str, str]:
        return {"name": self.name, "key": self.key}


SLURM_KEY = SecretKey("slurm-auth-slurm", "slurm.key")
JWT_KEY = SecretKey("slurm-auth-jwt", "jwt.key")
SSSD = SecretKey("slurm-sssd", "sssd.conf")
DB_PASSWORD = SecretKey("slurm-db-password", "password")


@dataclass(frozen=True)
class DatabaseTls:
    """The CA bundle slurmdbd verifies the database's certificate with, fetched at pod start by `image` (curl)."""

    ca_bundle_url: pulumi.Input[str]
    image: str


@dataclass(frozen=True)
class Database:
    """Where slurmdbd writes: a MariaDB reachable from the cluster, its password in `DB_PASSWORD`."""

    host: pulumi.Input[str]
    port: int
    database: str
    username: str
    tls: DatabaseTls | None = None


DB_CA_DIR = "/etc/slurm-eks/db-ca"
DB_CA_FILE = f"{DB_CA_DIR}/ca.pem"


def database_tls(tls: DatabaseTls) -> dict[str, Any]:
    """slurmdbd's TLS to the database: StorageParameters SSL_CA (slurmdbd.conf(5) of Slurm 25.11; src/database/
    mysql_common.c `_set_mysql_ssl_opts` hands it to mysql_ssl_set) appended through the Accounting's extraConf
    (Slinky v1.2.1 accounting_config.go), and an init container that puts the bundle in a memory emptyDir."""
    volume = {"name": "db-ca", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
    fetch = {"name": "db-ca", "image": tls.image, "env": [{"name": "CA_URL", "value": tls.ca_bundle_url}],
             "command": ["sh", "-c", f'curl -fsS --retry 5 -o {DB_CA_FILE} "$CA_URL"'],
             "volumeMounts": [{"name": "db-ca", "mountPath": DB_CA_DIR}], "resources": guaranteed(Resources(100, 64))}
    return {"extraConf": f"StorageParameters=SSL_CA={DB_CA_FILE}",
            "volume": volume, "initContainer": fetch,
            "mount": {"name": "db-ca", "mountPath": DB_CA_DIR, "readOnly": True}}


def pod_identity(config: ClusterConfig, kind: identity.PodKind, image: str) -> identity.PodIdentity:
    return identity.pod_identity(config.slurm.identity, kind, image, IDENTITY_CONFIG_MAP, SSSD.name,
                                 guaranteed(IDENTITY_SETUP))


def with_mounts(container: dict[str, Any], pod: identity.PodIdentity) -> dict[str, Any]:
    """The daemon container's spec (merged by Slinky into its own) with the identity's mounts added."""
    mounts = [*container.get("volumeMounts", []), *pod.mounts]
    return {**container, "volumeMounts": mounts} if mounts else container


def pod_template(spec: dict[str, Any], pod: identity.PodIdentity) -> dict[str, Any]:
    """A Slinky pod template (merged into the operator's pod: initContainers by name, volumes by name) with the
    identity's volumes, init containers and annotations added."""
    volumes = [*spec.get("volumes", []), *pod.volumes]
    spec = {**spec, **({"volumes": volumes} if volumes else {}),
            **({"initContainers": pod.init_containers} if pod.init_containers else {})}
    return {**({"metadata": {"annotations": pod.annotations}} if pod.annotations else {}), "spec": spec}


def on_system_nodes(pod: identity.PodIdentity | None = None) -> dict[str, Any]:
    return pod_template({"nodeSelector": SYSTEM_NODE_SELECTOR}, pod or identity.PodIdentity())


def controller_spec(config: ClusterConfig, cluster_name: str, storage_class: pulumi.Input[str],
                    config_maps: list[str]) -> dict[str, Any]:
    instances = {name: partition_instance(p) for name, p in config.partitions.items()}
    image = slurm_image(config.slurm, "slurmctld")
    # REST (JWT) submissions are resolved by slurmctld itself (components/slinky/identity.py).
    pod = pod_identity(config, "daemon", image)
    return {
        "clusterName": cluster_name,  # what sacct/sacctmgr show; one accounting database can hold several
        "slurmKeyRef": SLURM_KEY.ref,
        "jwtKeyRef": JWT_KEY.ref,
        "accountingRef": {"name": CONTROLLER},
        "slurmctld": with_mounts({"image": image}, pod),
        "reconfigure": {"image": image},
        # With the topology ConfigMap (components/slinky/lifecycle_settings.py), whose data the lifecycle controller
        # rewrites as nodes come and go: `scontrol reconfigure` by the reconfigure container when /etc/slurm
        # changes, not a new slurmctld pod (CRD v1.2.1 spec.inplaceReconfigure; controller_app.go, reconfigure.sh).
        **({"inplaceReconfigure": True} if places_topology(config) else {}),
        "logfile": logfile_sidecar(image),
        "configFileRefs": [{"name": n} for n in config_maps],
        # Save-state survives pod restarts: jobs, reservations and node states come back with slurmctld.
        "persistence": {"enabled": True, "storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": STATE_SIZE}}},
        # Slurm's own OpenMetrics (MetricsType=metrics/openmetrics), scraped through a ServiceMonitor.
        "metrics": {"enabled": True, "serviceMonitor": {
            "enabled": True, "interval": "30s", "endpoints": [{"path": p} for p in METRICS_ENDPOINTS]}},
        "template": on_system_nodes(pod),
        # node-check.sh as Prolog and Epilog (components/slinky/node_health.py), its settings in extraConf.
        **node_health.controller_fields(),
        "extraConf": slurm_conf.controller_extra_conf(instances) + slurm_conf.lines(
            slurm_conf.accounting_conf(config) | health_slurm_conf(config) | slurm_conf.token_conf(config)),
    }


def accounting_spec(config: ClusterConfig, db: Database) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "slurmKeyRef": SLURM_KEY.ref,
        "jwtKeyRef": JWT_KEY.ref,
        "slurmdbd": {"image": slurm_image(config.slurm, "slurmdbd")},
        "storageConfig": {"host": db.host, "port": db.port, "database": db.database, "username": db.username,
                          "passwordKeyRef": DB_PASSWORD.ref},
        "template": on_system_nodes(),
    }
    if db.tls:
        tls = database_tls(db.tls)
        spec["extraConf"] = tls["extraConf"]
        spec["slurmdbd"]["volumeMounts"] = [tls["mount"]]
        spec["template"] = pod_template({"nodeSelector": SYSTEM_NODE_SELECTOR, "volumes": [tls["volume"]],
                                         "initContainers": [tls["initContainer"]]}, identity.PodIdentity())
    return spec


def restapi_spec(config: ClusterConfig) -> dict[str, Any]:
    image = slurm_image(config.slurm, "slurmrestd")
    pod = pod_identity(config, "daemon", image)  # user names in requests (e.g. data_parser's USER_ID)
    return {
        "controllerRef": {"name": CONTROLLER},
        "replicas": config.slurm.restapi.replicas,
        "slurmrestd": with_mounts({"image": image}, pod),
        "template": on_system_nodes(pod),
    }


def login_service(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> dict[str, Any]:
    """An NLB on port 22 that only `login.allowedCidrs` (or, when empty, the VPC) may reach."""
    annotations = {NLB_TYPE: "nlb"}
    ranges: list[pulumi.Input[str]] = list(config.slurm.login.allowed_cidrs)
    if not ranges:  # nobody named from outside: an internal NLB, reachable from the VPC only
        annotations[NLB_INTERNAL] = "true"
        ranges = [vpc_cidr]
    return {"metadata": {"annotations": annotations}, "port": 22,
            "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ranges}}


INITCONF_RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}


def loginset_spec(config: ClusterConfig, vpc_cidr: pulumi.Input[str], partitions_config_map: str) -> dict[str, Any]:
    login = config.slurm.login
    image = slurm_image(config.slurm, "login")
    pod = pod_identity(config, "login", image)
    model_volumes, model_mounts = model_volume(config.storage.efs)  # read-only /models beside /shared
    spec: dict[str, Any] = {
        "controllerRef": {"name": CONTROLLER},
        "replicas": login.replicas,
        "sssdConfRef": SSSD.ref,
        "extraSshdConfig": identity.sshd_config(config.slurm.identity, root_keys=bool(login.root_ssh_keys)),
        # The operator always adds an `initconf` init container (copies slurm.key into /etc/slurm) and gives it
        # no image of its own (slurm-operator v1.2.1 internal/builder/common/common.go InitconfContainer; its
        # Helm chart fills in alpine): without one the API server refuses every login pod. The login image has
        # the sh, find, cp and chown its script runs.
        "initconf": {"image": image, "resources": INITCONF_RESOURCES},
        "login": with_mounts({"image": image, "volumeMounts": [
            SHARED_VOLUME_MOUNT, *model_mounts,
            {"name": "partitions", "mountPath": PARTITIONS_FILE, "subPath": "partitions.json", "readOnly": True}]},
            pod),
        # Volumes belong in the pod template: Slinky silently ignores them anywhere else. Login pods run where
        # people's shells cannot reach the controllers' credentials: the tainted login node group.
        "template": pod_template({
            "nodeSelector": LOGIN_NODE_SELECTOR, "tolerations": tolerations_for([LOGIN_TAINT]),
            "volumes": [SHARED_VOLUME, *model_volumes,
                        {"name": "partitions", "configMap": {"name": partitions_config_map}}]}, pod),
        "service": login_service(config, vpc_cidr),
    }
    if login.root_ssh_keys:
        spec["rootSshAuthorizedKeys"] = "".join(f"{k.strip()}\n" for k in login.root_ssh_keys)
    return spec


def nodeset_spec(name: str, config: ClusterConfig) -> dict[str, Any]:
    """One slurmd pod per node of the partition's NodePool: it tolerates and selects that NodePool's nodes and
    requests every accelerator and EFA interface, so no second slurmd fits, and the node's CPU and memory as a
    Guaranteed pod. The operator hands slurmd's limits to its image as POD_CPUS/POD_MEMORY (slurm-operator
    v1.2.1 worker_app.go getResourceLimits), which become `CoreSpecCount`/`MemSpecLimit` against what `slurmd
    -C` finds on the host (SlinkyProject/containers 05efda08 schedmd/slurm/25.11/ubuntu24.04/files/usr/local/
    bin/slurmd-entrypoint.sh): Slurm schedules only what the pod has. No CPUs or RealMemory in extraConf, or
    the host's share would be taken off twice."""
    partition = config.partitions[name]
    instance = partition_instance(partition)
    devices = device_requests(instance, partition_efa_interfaces(partition))
    image = slurm_image(config.slurm, "slurmd")
    pod = pod_identity(config, "compute", image)
    model_volumes, model_mounts = model_volume(config.storage.efs)
    # The jobs' AWS identity for the checkpoint store (components/slinky/job_aws.py), when there is a store.
    job_aws_fields, job_aws_volumes, job_aws_mounts = nodeset_additions(config.storage.checkpoint_store)
    spec: dict[str, Any] = {
        "controllerRef": {"name": CONTROLLER},
        "replicas": partition.min_nodes,
        "slurmd": with_mounts({
            "image": image,
            "resources": guaranteed(slurmd_resources(partition), devices),
            "volumeMounts": [SHARED_VOLUME_MOUNT, *model_mounts, SHM_VOLUME_MOUNT,
                             *node_health.nodeset_mounts(name, config), *job_aws_mounts],
        }, pod),
        "logfile": logfile_sidecar(image),
        "partition": {"enabled": True, "config": slurm_conf.partition_conf(name, config)},
        "template": pod_template({
            **job_aws_fields,
            "nodeSelector": node_labels(name, instance),
            "tolerations": tolerations_for(node_taints(instance)),
            "volumes": [SHARED_VOLUME, *model_volumes, SHM_VOLUME, *node_health.nodeset_volumes(name, config),
                        *job_aws_volumes],
        }, pod),
        # New templates reach pods as they are replaced (autoscaling recycles them), never under a job.
        "updateStrategy": {"type": "OnDelete"},
        "workloadDisruptionProtection": True,
    }
    extra = slurm_conf.nodeset_extra_conf(partition, instance)
    if extra:
        spec["extraConf"] = extra
    return spec


def partitions_document(config: ClusterConfig) -> dict[str, Any]:
    """What the job tooling on the login pod needs to know about each partition."""
    return {name: {
        "image": training_image(p),
        "accelerator": partition_instance(p).accelerator,
        "acceleratorsPerNode": partition_instance(p).accelerators,
        "efaInterfaces": partition_efa_interfaces(p),
        "maxNodes": p.max_nodes,
        "maxTime": p.max_time,
        "default": name == config.default_partition,
    } for name, p in config.partitions.items()}
