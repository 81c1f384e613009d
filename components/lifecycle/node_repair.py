"""`NodeRepair`: the node lifecycle controller in the `slurm` namespace (slurm/health/, slurm/topology/,
slurm/capacity/; the standard library, and boto3 for EC2): repair, active checks, and with EFA partitions or Capacity
Blocks the EC2 side (components/slinky/lifecycle_settings.py) through an IRSA role of its own.

It is a Slurm client the way the accounts reconcile is (components/slinky/accounts.py: the login image, sackd
fetching the configuration and signing with the Controller's slurm.key), so it reads nodes with the same
`scontrol show nodes --json` and drains with the same `scontrol update` as the local tests drive. The
controller runs as `slurm` (uid 401 in Slinky's images, SlinkyProject/containers schedmd/slurm/25.11/
ubuntu24.04/Dockerfile SLURM_USER_UID), which is SlurmUser (an administrator: it may drain nodes) and not
root (whose jobs `DisableRootJobs=YES` refuses: the active checks are jobs); sackd starts as root first, as in
the reconcile Job.

Kubernetes: it reads the slurmd pod (Slinky names Slurm nodes after their pods) for its node, deletes that
node's Karpenter NodeClaim (karpenter.sh/v1; Karpenter drains and terminates the instance, and the NodeSet's
pod comes back on a new one), and keeps its replacement history in a ConfigMap so its hourly bound survives a
restart. One replica, replaced (not rolled): two controllers would double the bound. Metrics on METRICS_PORT,
scraped through a PodMonitor.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

import slurm.capacity
import slurm.health
import slurm.topology
from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig
from components.names import SHARED_MOUNT, SLURM_NAMESPACE
from components.slinky import specs
from components.slinky.accounts import KEY_VOLUME, SACKD_START, client_container
from components.slinky.health_settings import ACTIVE_CHECK_USER, active_checks, active_interval_seconds
from components.slinky.lifecycle_settings import (
    TOPOLOGY_CONFIG_MAP,
    ec2_actions,
    lifecycle_settings,
    places_topology,
)

NAME = "slurm-eks-repair"
POD_LABELS = {"app.kubernetes.io/name": NAME}
LEDGER_CONFIG_MAP = f"{NAME}-ledger"
SETTINGS_CONFIG_MAP = f"{NAME}-settings"
CODE_CONFIG_MAP = f"{NAME}-code"
# The controller ships as these packages' source files in a ConfigMap; imported here so the dependency shows in
# the import graph (the import-linter contracts in pyproject.toml allow exactly these).
SHIPPED = (slurm.health, slurm.topology, slurm.capacity)
PACKAGES = tuple(pkg.__name__.rpartition(".")[2] for pkg in SHIPPED)
SETTINGS_DIR = "/etc/slurm-eks/repair"
METRICS_PORT = 9810
SLURM_USER = ACTIVE_CHECK_USER
PASS_SECONDS = 60
# How often the pending jobs' nodes are counted for KEDA (slurm/health/demand.py): twice per KEDA poll
# (components/lifecycle/autoscaling.py POLLING_SECONDS, which imports from here through the NetworkPolicies).
DEMAND_SECONDS = 15
# Probes (Slurm jobs as `slurm` on the checked node) write their output here; the controller reads it. Made by
# root at start (FSx has no root squash unless configured), owned by `slurm`.
ACTIVE_OUTPUT_DIR = f"{SHARED_MOUNT}/.slurm-eks/active-checks"
SCRIPT = (f"{SACKD_START}install -d -o {SLURM_USER} -g {SLURM_USER} -m 0750 {ACTIVE_OUTPUT_DIR}\n"
          f"exec runuser -u {SLURM_USER} -- python3 -m slurm.health --settings {SETTINGS_DIR}/settings.json\n")


def package_files() -> dict[str, str]:
    """The controller's source files, keyed `<package>.<file>` (a ConfigMap key cannot hold a '/')."""
    return {f"{pkg}.{path.name}": path.read_text() for pkg, package in zip(PACKAGES, SHIPPED, strict=True)
            for path in sorted(Path(package.__file__).parent.glob("*.py"))}


def settings(config: ClusterConfig) -> dict[str, Any]:
    """What the controller reads at start (slurm/health/__main__.py)."""
    health = config.health
    checks = {}
    for name, check in active_checks(config).items():
        instance = partition_instance(config.partitions[name])
        nvidia = instance.accelerator == "nvidia"
        checks[name] = {"kind": "nccl" if nvidia else "neuron",
                        "ranks": instance.accelerators if nvidia else instance.neuron_cores,
                        "floorGBps": check.min_bus_bandwidth_gbps}
    return {
        "namespace": SLURM_NAMESPACE,
        "ledgerConfigMap": LEDGER_CONFIG_MAP,
        "metricsPort": METRICS_PORT,
        "passSeconds": PASS_SECONDS,
        "repair": {"enabled": health.repair.enabled, "maxPerHour": health.repair.max_replacements_per_hour},
        "activeChecks": {"intervalSeconds": active_interval_seconds(config), "outputDir": ACTIVE_OUTPUT_DIR,
                         "relativeFloor": health.active_checks.relative_floor,
                         "maxNodesPerRound": health.active_checks.max_nodes_per_round, "partitions": checks},
        # The pending jobs' nodes, per partition, for KEDA (slurm/health/demand.py): a job asking for more than
        # maxNodes never starts, so it counts 0; refreshed twice per KEDA poll.
        "demand": {"seconds": DEMAND_SECONDS,
                   "maxNodes": {name: p.max_nodes for name, p in config.partitions.items()}},
        **lifecycle_settings(config),
    }


def deployment_spec(config: ClusterConfig, code: dict[str, str], settings_json: str) -> dict[str, Any]:
    code_items = [{"key": key, "path": "slurm/" + key.replace(".", "/", 1)} for key in sorted(code)]
    # A new pod whenever the code or settings change (a running one would keep what it read at start).
    digest = hashlib.sha256(settings_json.encode())
    for name, text in sorted(code.items()):
        digest.update(f"\0{name}\0{text}".encode())
    container = client_container(config, "repair", SCRIPT, [
        {"name": "settings", "mountPath": SETTINGS_DIR, "readOnly": True}, specs.SHARED_VOLUME_MOUNT])
    container["env"].append({"name": "PYTHONUNBUFFERED", "value": "1"})  # its JSON log lines, as they happen
    container["ports"] = [{"name": "metrics", "containerPort": METRICS_PORT}]
    container["readinessProbe"] = {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 30}
    return {
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": POD_LABELS},
        "template": {"metadata": {"labels": POD_LABELS,
                                  "annotations": {"slurm-eks.io/config-sha256": digest.hexdigest()}}, "spec": {
            "serviceAccountName": NAME,
            "nodeSelector": SYSTEM_NODE_SELECTOR,
            "containers": [container],
            "volumes": [KEY_VOLUME, {"name": "settings", "configMap": {"name": SETTINGS_CONFIG_MAP}},
                        {"name": "code", "configMap": {"name": CODE_CONFIG_MAP, "items": code_items}},
                        specs.SHARED_VOLUME],
        }},
    }


def namespace_rules(config: ClusterConfig) -> list[dict[str, Any]]:
    """Least privilege: its slurmd pods (listed to place them in the topology), its ledger, and the topology
    ConfigMap it writes."""
    topology = places_topology(config)
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] if topology else ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": [LEDGER_CONFIG_MAP, *([TOPOLOGY_CONFIG_MAP] if topology else [])],
         "verbs": ["get", "update"]},
    ]


def cluster_rules(config: ClusterConfig) -> list[dict[str, Any]]:
    """Karpenter's NodeClaims (read, delete); with topology, the nodes (listed for their instance ids; the Slinky
    topology annotation, a merge patch)."""
    rules = [{"apiGroups": ["karpenter.sh"], "resources": ["nodeclaims"], "verbs": ["get", "list", "delete"]}]
    if places_topology(config):
        rules.append({"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]})
    return rules


def ec2_read_policy(actions: list[str]) -> dict[str, Any]:
    """Resource "*": none of the actions has a resource type (components/slinky/lifecycle_settings.py)."""
    return {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}


@dataclass(frozen=True)
class NodeRepairArgs:
    config: ClusterConfig
    provider: k8s.Provider
    depends_on: list[pulumi.Resource]  # the Controller (slurmctld), the Prometheus CRDs (PodMonitor), /shared
    cluster: EksCluster  # its IRSA role, when it reads EC2


class NodeRepair(pulumi.ComponentResource):
    def __init__(self, name: str, args: NodeRepairArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:NodeRepair", name, None, opts)
        code = package_files()

        def options(after: list[pulumi.Resource], **more: Any) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=after, **more)

        def meta(object_name: str) -> dict[str, Any]:
            return {"name": object_name, "namespace": SLURM_NAMESPACE, "labels": POD_LABELS}

        after = args.depends_on
        account_meta = meta(NAME)
        if actions := ec2_actions(args.config):
            aws_role = args.cluster.irsa_role(f"{name}-ec2", SLURM_NAMESPACE, NAME, pulumi.ResourceOptions(parent=self))
            aws.iam.RolePolicy(f"{name}-ec2", role=aws_role.id, policy=json.dumps(ec2_read_policy(actions)),
                               opts=pulumi.ResourceOptions(parent=self))
            # amazon-eks-pod-identity-webhook: this annotation makes EKS project a web identity token and set
            # AWS_ROLE_ARN / AWS_WEB_IDENTITY_TOKEN_FILE in the pod (boto3's credential chain trades them with STS:
            # slurm/agent/aws.py).
            account_meta["annotations"] = {"eks.amazonaws.com/role-arn": aws_role.arn}
        account = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=account_meta, opts=options(after))
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=meta(NAME), rules=namespace_rules(args.config),
                                opts=options(after))
        cluster_role = k8s.rbac.v1.ClusterRole(f"{name}-cluster-role", metadata={"name": NAME, "labels": POD_LABELS},
                                               rules=cluster_rules(args.config), opts=options(after))
        subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": SLURM_NAMESPACE}]
        bindings = [
            k8s.rbac.v1.RoleBinding(f"{name}-binding", metadata=meta(NAME), subjects=subject,
                                    role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
                                    opts=options([role, account])),
            k8s.rbac.v1.ClusterRoleBinding(f"{name}-cluster-binding", metadata={"name": NAME, "labels": POD_LABELS},
                                           subjects=subject, role_ref={"apiGroup": "rbac.authorization.k8s.io",
                                                                       "kind": "ClusterRole", "name": NAME},
                                           opts=options([cluster_role, account])),
        ]
        # The controller owns the ledger's data once it runs; Pulumi only makes sure the object exists.
        ledger = k8s.core.v1.ConfigMap(f"{name}-ledger", metadata=meta(LEDGER_CONFIG_MAP),
                                       opts=options(after, ignore_changes=["data"]))
        settings_json = json.dumps(settings(args.config), indent=2, sort_keys=True)
        maps = [k8s.core.v1.ConfigMap(f"{name}-settings", metadata=meta(SETTINGS_CONFIG_MAP),
                                      data={"settings.json": settings_json}, opts=options(after)),
                k8s.core.v1.ConfigMap(f"{name}-code", metadata=meta(CODE_CONFIG_MAP), data=code, opts=options(after))]
        k8s.apps.v1.Deployment(f"{name}-deployment", metadata=meta(NAME),
                               spec=deployment_spec(args.config, code, settings_json),
                               opts=options([*after, *bindings, ledger, *maps]))
        k8s.apiextensions.CustomResource(
            f"{name}-pod-monitor", api_version="monitoring.coreos.com/v1", kind="PodMonitor", metadata=meta(NAME),
            spec={"selector": {"matchLabels": POD_LABELS}, "podMetricsEndpoints": [{"port": "metrics"}]},
            opts=options(after))
        self.register_outputs({})
