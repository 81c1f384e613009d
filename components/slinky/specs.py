"""The `spec` of each Slinky object, built from the config. Field names follow the v1beta1 CRDs in
../shared/crds/slinky; container and pod template fields are Kubernetes' own (the CRDs keep them opaque,
so tests validate them as a Pod)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components.cluster import SYSTEM_NODE_SELECTOR
from components.config import ClusterConfig
from components.names import ALLOW_PUBLIC_SSH_ANNOTATION, SHARED_MOUNT, SHARED_PVC
from components.scheduling import (
    device_requests,
    node_labels,
    node_taints,
    partition_efa_interfaces,
    partition_instance,
    tolerations_for,
)
from components.slinky import slurm_conf
from components.slinky.images import slurm_image, training_image

API_VERSION = "slinky.slurm.net/v1beta1"
CONTROLLER = "slurm"  # the Controller and Accounting objects; also Slurm's ClusterName prefix
STATE_SIZE = "16Gi"
SHARED_VOLUME = {"name": "shared", "persistentVolumeClaim": {"claimName": SHARED_PVC}}
SHARED_VOLUME_MOUNT = {"name": "shared", "mountPath": SHARED_MOUNT}
# NCCL and PyTorch data loaders exchange tensors through /dev/shm; the container default is 64 MiB.
SHM_VOLUME = {"name": "shm", "emptyDir": {"medium": "Memory"}}
SHM_VOLUME_MOUNT = {"name": "shm", "mountPath": "/dev/shm"}
PARTITIONS_FILE = "/etc/slurm-eks/partitions.json"
METRICS_ENDPOINTS = ["/metrics/partitions", "/metrics/nodes", "/metrics/jobs", "/metrics/scheduler"]
# Slinky's chart default: local users only (root and slurm are filtered out of NSS).
SSSD_CONF = """[sssd]
config_file_version = 2
services = nss,pam
domains = DEFAULT

[nss]
filter_groups = root,slurm
filter_users = root,slurm

[pam]

[domain/DEFAULT]
id_provider = files
auth_provider = files
"""
NLB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"
NLB_INTERNAL = "service.beta.kubernetes.io/aws-load-balancer-internal"


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
class Database:
    """Where slurmdbd writes: a MariaDB reachable from the cluster, its password in `DB_PASSWORD`."""

    host: pulumi.Input[str]
    port: int
    database: str
    username: str


def on_system_nodes() -> dict[str, Any]:
    return {"spec": {"nodeSelector": SYSTEM_NODE_SELECTOR}}


def controller_spec(config: ClusterConfig, cluster_name: str, storage_class: pulumi.Input[str],
                    config_maps: list[str]) -> dict[str, Any]:
    instances = {name: partition_instance(p) for name, p in config.partitions.items()}
    image = slurm_image(config.slurm, "slurmctld")
    spec: dict[str, Any] = {
        "clusterName": cluster_name,  # what sacct/sacctmgr show; one accounting database can hold several
        "slurmKeyRef": SLURM_KEY.ref,
        "jwtKeyRef": JWT_KEY.ref,
        "accountingRef": {"name": CONTROLLER},
        "slurmctld": {"image": image},
        "reconfigure": {"image": image},
        "configFileRefs": [{"name": n} for n in config_maps],
        # Save-state survives pod restarts: jobs, reservations and node states come back with slurmctld.
        "persistence": {"enabled": True, "storageClassName": storage_class, "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": STATE_SIZE}}},
        # Slurm's own OpenMetrics (MetricsType=metrics/openmetrics), scraped through a ServiceMonitor.
        "metrics": {"enabled": True, "serviceMonitor": {
            "enabled": True, "interval": "30s", "endpoints": [{"path": p} for p in METRICS_ENDPOINTS]}},
        "template": on_system_nodes(),
    }
    extra = slurm_conf.controller_extra_conf(instances)
    if extra:
        spec["extraConf"] = extra
    return spec


def accounting_spec(config: ClusterConfig, db: Database) -> dict[str, Any]:
    return {
        "slurmKeyRef": SLURM_KEY.ref,
        "jwtKeyRef": JWT_KEY.ref,
        "slurmdbd": {"image": slurm_image(config.slurm, "slurmdbd")},
        "storageConfig": {"host": db.host, "port": db.port, "database": db.database, "username": db.username,
                          "passwordKeyRef": DB_PASSWORD.ref},
        "template": on_system_nodes(),
    }


def restapi_spec(config: ClusterConfig) -> dict[str, Any]:
    return {
        "controllerRef": {"name": CONTROLLER},
        "replicas": config.slurm.restapi.replicas,
        "slurmrestd": {"image": slurm_image(config.slurm, "slurmrestd")},
        "template": on_system_nodes(),
    }


def login_service(config: ClusterConfig, vpc_cidr: pulumi.Input[str]) -> dict[str, Any]:
    """An NLB on port 22 that only `login.allowedCidrs` (or, when empty, the VPC) may reach."""
    annotations = {NLB_TYPE: "nlb"}
    ranges: list[pulumi.Input[str]] = list(config.slurm.login.allowed_cidrs)
    if not ranges:  # nobody named from outside: an internal NLB, reachable from the VPC only
        annotations[NLB_INTERNAL] = "true"
        ranges = [vpc_cidr]
    if config.slurm.login.allow_public_ssh:
        annotations[ALLOW_PUBLIC_SSH_ANNOTATION] = "true"
    return {"metadata": {"annotations": annotations}, "port": 22,
            "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ranges}}


def loginset_spec(config: ClusterConfig, vpc_cidr: pulumi.Input[str], partitions_config_map: str) -> dict[str, Any]:
    login = config.slurm.login
    spec: dict[str, Any] = {
        "controllerRef": {"name": CONTROLLER},
        "replicas": login.replicas,
        "sssdConfRef": SSSD.ref,
        "login": {"image": slurm_image(config.slurm, "login"), "volumeMounts": [
            SHARED_VOLUME_MOUNT,
            {"name": "partitions", "mountPath": PARTITIONS_FILE, "subPath": "partitions.json", "readOnly": True}]},
        # Volumes belong in the pod template: Slinky silently ignores them anywhere else.
        "template": {"spec": {"nodeSelector": SYSTEM_NODE_SELECTOR, "volumes": [
            SHARED_VOLUME, {"name": "partitions", "configMap": {"name": partitions_config_map}}]}},
        "service": login_service(config, vpc_cidr),
    }
    if login.ssh_keys:
        spec["rootSshAuthorizedKeys"] = "".join(f"{k.strip()}\n" for k in login.ssh_keys)
    return spec


def nodeset_spec(name: str, config: ClusterConfig) -> dict[str, Any]:
    """One slurmd pod per node of the partition's NodePool: it tolerates and selects that NodePool's nodes and
    requests every accelerator and EFA interface, so no second slurmd fits."""
    partition = config.partitions[name]
    instance = partition_instance(partition)
    devices = device_requests(instance, partition_efa_interfaces(partition))
    spec: dict[str, Any] = {
        "controllerRef": {"name": CONTROLLER},
        "replicas": partition.min_nodes,
        "slurmd": {
            "image": slurm_image(config.slurm, "slurmd"),
            "resources": {"requests": devices, "limits": devices},
            "volumeMounts": [SHARED_VOLUME_MOUNT, SHM_VOLUME_MOUNT],
        },
        "partition": {"enabled": True, "config": slurm_conf.partition_conf(name, config)},
        "template": {"spec": {
            "nodeSelector": node_labels(name, instance),
            "tolerations": tolerations_for(node_taints(instance)),
            "volumes": [SHARED_VOLUME, SHM_VOLUME],
        }},
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
