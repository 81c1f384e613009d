"""`NodeRepair`: the node lifecycle controller in the `slurm` namespace, the lifecycle agent of the slurm-eks agent
image (`python3 -m slurm.agent lifecycle`, components/slinky/agent_image.py): repair, active checks, and with EFA
partitions or Capacity Blocks the EC2 side (components/slinky/lifecycle_settings.py) through an IRSA role of its
own. Its ConfigMap carries its settings document (slurm/agent/contract.py LifecycleSettings), no code.

It is a Slurm client the way the accounts reconcile is (components/slinky/accounts.py: sackd fetching the
configuration and signing with the Controller's slurm.key), so it reads nodes with the same
`scontrol show nodes --json` and drains with the same `scontrol update` as the local tests drive. The
controller runs as `slurm` (uid 401 in Slinky's images, SlinkyProject/containers schedmd/slurm/25.11/
ubuntu24.04/Dockerfile SLURM_USER_UID), which is SlurmUser (an administrator: it may drain nodes) and not
root (whose jobs `DisableRootJobs=YES` refuses: the active checks are jobs); so does its sackd.

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
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws.eks import SYSTEM_NODE_SELECTOR, EksCluster
from components.compute.scheduling import partition_instance
from components.config.cluster import ClusterConfig
from components.lifecycle.repair_scope import repair_scope_policy
from components.names import SHARED_MOUNT, SLURM_NAMESPACE
from components.slinky import specs
from components.slinky.accounts import (
    CONTAINER_SECURITY,
    KEY_VOLUME,
    POD_SECURITY,
    RESOURCES,
    RUN_VOLUME,
    agent_container,
)
from components.slinky.agent_image import AgentImage
from components.slinky.health_settings import active_checks, active_interval_seconds
from components.slinky.lifecycle_settings import (
    TOPOLOGY_CONFIG_MAP,
    capacity_blocks,
    ec2_actions,
    places_topology,
    topology_settings,
)
from slurm.agent import contract

NAME = "slurm-eks-repair"
POD_LABELS = {"app.kubernetes.io/name": NAME, **contract.AGENT_POD_LABELS}
LEDGER_CONFIG_MAP = f"{NAME}-ledger"
SETTINGS_CONFIG_MAP = f"{NAME}-settings"
SETTINGS_DIR = "/etc/slurm-eks/repair"
METRICS_PORT = 9810
PASS_SECONDS = 60
# How often the pending jobs' nodes are counted for KEDA (slurm/agent/health/demand.py): twice per KEDA poll
# (components/lifecycle/autoscaling.py POLLING_SECONDS, which imports from here through the NetworkPolicies).
DEMAND_SECONDS = 15
# Probes (Slurm jobs as `slurm` on the checked node) write their output here; the controller reads it. Made by
# an init container as root (the only step that is: FSx's root directory is root's), owned by the agent.
ACTIVE_OUTPUT_DIR = f"{SHARED_MOUNT}/.slurm-eks/active-checks"


def settings(config: ClusterConfig) -> contract.LifecycleSettings:
    """What the controller reads at start (slurm/agent/health/__main__.py)."""
    health = config.health
    checks = {}
    for name, check in active_checks(config).items():
        instance = partition_instance(config.partitions[name])
        nvidia = instance.accelerator == "nvidia"
        checks[name] = contract.ActiveCheckSettings("nccl" if nvidia else "neuron",
                                                    instance.accelerators if nvidia else instance.neuron_cores,
                                                    check.min_bus_bandwidth_gbps)
    return contract.LifecycleSettings(
        namespace=SLURM_NAMESPACE,
        ledger_config_map=LEDGER_CONFIG_MAP,
        metrics_port=METRICS_PORT,
        pass_seconds=PASS_SECONDS,
        repair_enabled=health.repair.enabled,
        repair_max_per_hour=health.repair.max_replacements_per_hour,
        active_interval_seconds=active_interval_seconds(config),
        active_output_dir=ACTIVE_OUTPUT_DIR,
        active_relative_floor=health.active_checks.relative_floor,
        active_max_nodes_per_round=health.active_checks.max_nodes_per_round,
        active_partitions=checks,
        # The pending jobs' nodes, per partition, for KEDA (slurm/agent/health/demand.py): a job asking for more than
        # maxNodes never starts, so it counts 0; refreshed twice per KEDA poll.
        demand_seconds=DEMAND_SECONDS,
        demand_max_nodes={name: p.max_nodes for name, p in config.partitions.items()},
        region=config.region,
        topology=topology_settings(config),
        capacity_blocks=capacity_blocks(config),
    )


# The container runtime's default capabilities (containerd oci/spec.go defaultUnixCaps) but CHOWN: dropping them
# leaves root CHOWN alone without *adding* one, which the slurm namespace's admission policy allows no pod but
# slurmd (components/slinky/host_access.py).
DEFAULT_CAPABILITIES_BUT_CHOWN = ["AUDIT_WRITE", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                  "NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                                  "SYS_CHROOT"]


def output_dir_init(image: AgentImage) -> dict[str, Any]:
    """The one step as root: make the probes' output directory on /shared (root's), owned by the agent."""
    uid = str(contract.AGENT_UID)
    return {"name": "active-output", "image": image.reference,
            "command": ["install", "-d", "-o", uid, "-g", uid, "-m", "0750", ACTIVE_OUTPUT_DIR],
            "securityContext": {**CONTAINER_SECURITY, "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False,
                                "capabilities": {"drop": DEFAULT_CAPABILITIES_BUT_CHOWN}},
            "resources": specs.guaranteed(RESOURCES),
            "volumeMounts": [specs.SHARED_VOLUME_MOUNT]}


def deployment_spec(image: AgentImage, settings_json: str) -> dict[str, Any]:
    # A new pod whenever the settings or the image change (a running one keeps what it read at start).
    digest = hashlib.sha256(f"{settings_json}\0{image.identity}".encode())
    container = agent_container(image, "repair", [
        contract.LIFECYCLE_AGENT, contract.SETTINGS_OPTION, f"{SETTINGS_DIR}/{contract.SETTINGS_FILE}"], [
        {"name": "settings", "mountPath": SETTINGS_DIR, "readOnly": True}, specs.SHARED_VOLUME_MOUNT])
    container["ports"] = [{"name": "metrics", "containerPort": METRICS_PORT}]
    container["readinessProbe"] = {"httpGet": {"path": "/metrics", "port": "metrics"}, "periodSeconds": 30}
    return {
        "replicas": 1,
        "strategy": {"type": "Recreate"},
        # The name label alone: a Deployment's selector cannot change once it exists.
        "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
        "template": {"metadata": {"labels": POD_LABELS,
                                  "annotations": {contract.CONFIG_DIGEST_ANNOTATION: digest.hexdigest()}}, "spec": {
            "serviceAccountName": NAME,
            "nodeSelector": SYSTEM_NODE_SELECTOR,
            "securityContext": POD_SECURITY,
            "initContainers": [output_dir_init(image)],
            "containers": [container],
            "volumes": [KEY_VOLUME, RUN_VOLUME, {"name": "settings", "configMap": {"name": SETTINGS_CONFIG_MAP}},
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
    image: AgentImage  # the slurm-eks agent image (components/slinky/agent_image.py)


class NodeRepair(pulumi.ComponentResource):
    def __init__(self, name: str, args: NodeRepairArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("slurm-eks:index:NodeRepair", name, None, opts)

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
            # AWS_ROLE_ARN / AWS_WEB_IDENTITY_TOKEN_FILE in the pod, which boto3's credential chain trades with STS.
            account_meta["annotations"] = {"eks.amazonaws.com/role-arn": aws_role.arn}
        account = k8s.core.v1.ServiceAccount(f"{name}-sa", metadata=account_meta, opts=options(after))
        role = k8s.rbac.v1.Role(f"{name}-role", metadata=meta(NAME), rules=namespace_rules(args.config),
                                opts=options(after))
        cluster_role = k8s.rbac.v1.ClusterRole(f"{name}-cluster-role", metadata={"name": NAME, "labels": POD_LABELS},
                                               rules=cluster_rules(args.config), opts=options(after))
        # What RBAC cannot narrow (which nodes, which fields, which NodeClaims), before the agent holds the verbs.
        scope = repair_scope_policy(f"{name}-scope", args.config, NAME, options(after))
        subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": SLURM_NAMESPACE}]
        bindings = [
            k8s.rbac.v1.RoleBinding(f"{name}-binding", metadata=meta(NAME), subjects=subject,
                                    role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
                                    opts=options([role, account])),
            k8s.rbac.v1.ClusterRoleBinding(f"{name}-cluster-binding", metadata={"name": NAME, "labels": POD_LABELS},
                                           subjects=subject, role_ref={"apiGroup": "rbac.authorization.k8s.io",
                                                                       "kind": "ClusterRole", "name": NAME},
                                           opts=options([cluster_role, account, *scope])),
        ]
        # The controller owns the ledger's data once it runs; Pulumi only makes sure the object exists.
        ledger = k8s.core.v1.ConfigMap(f"{name}-ledger", metadata=meta(LEDGER_CONFIG_MAP),
                                       opts=options(after, ignore_changes=["data"]))
        settings_json = settings(args.config).json()
        settings_map = k8s.core.v1.ConfigMap(f"{name}-settings", metadata=meta(SETTINGS_CONFIG_MAP),
                                             data={contract.SETTINGS_FILE: settings_json}, opts=options(after))
        k8s.apps.v1.Deployment(f"{name}-deployment", metadata=meta(NAME),
                               spec=deployment_spec(args.image, settings_json),
                               opts=options([*after, *bindings, ledger, settings_map]))
        k8s.apiextensions.CustomResource(
            f"{name}-pod-monitor", api_version="monitoring.coreos.com/v1", kind="PodMonitor", metadata=meta(NAME),
            spec={"selector": {"matchLabels": POD_LABELS}, "podMetricsEndpoints": [{"port": "metrics"}]},
            opts=options(after))
        self.register_outputs({})
