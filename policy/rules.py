"""Rules that judge one resource by its own inputs: each a plain function (type, inputs) -> messages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model import UNKNOWN, ResourceRule, Waiver, dig, enabled, items
from policy.network import INGRESS_TYPES, WORLD, ingress_of

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
RDS = "aws:rds/instance:Instance"
EKS_COMPONENT = "eks:index:Cluster"  # pulumi-eks: all that the offline plan sees of the cluster
EKS_CLUSTER = "aws:eks/cluster:Cluster"  # its child, which `pulumi preview` also sees
SERVICE = "kubernetes:core/v1:Service"
LOGIN_SET = "kubernetes:slinky.slurm.net/v1beta1:LoginSet"

EBS_CSI = "ebs.csi.aws.com"
SSH_PORT = 22
_INTERNAL_LB = {"service.beta.kubernetes.io/aws-load-balancer-internal": "true",
                "service.beta.kubernetes.io/aws-load-balancer-scheme": "internal"}


def imdsv2_required(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    node_class = type_ == NODE_CLASS
    options = (dig(inputs, "spec", "metadataOptions") if node_class else inputs.get("metadataOptions")) or {}
    where = "spec.metadataOptions" if node_class else "metadataOptions"
    problems = []
    # Both default to enabled; disabled, nodeadm cannot read the instance's identity and the node never joins.
    if options.get("httpEndpoint") == "disabled":
        problems.append(f"{where}.httpEndpoint is disabled: the node cannot bootstrap (nodeadm reads IMDS)")
    # Karpenter's CRD defaults httpTokens to `required` (karpenter-provider-aws v1.14.1
    # pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml); unset on a launch template, EC2 takes the AMI's
    # setting, which allows IMDSv1 on most AMIs.
    tokens = options.get("httpTokens", "required" if node_class else "unset")
    if tokens not in ("required", UNKNOWN):
        problems.append(f"{where}.httpTokens is {tokens}: IMDSv1 lets any process on the node (a pod included, "
                        "through SSRF) read the node role's credentials without a token")
    return problems


def ebs_encrypted(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if type_ == STORAGE_CLASS:
        if inputs.get("provisioner") != EBS_CSI or enabled(dig(inputs, "parameters", "encrypted")):
            return []
        return [f"parameters.encrypted is not \"true\": volumes of this {EBS_CSI} StorageClass are unencrypted "
                "unless the account encrypts EBS by default"]
    mappings = items(dig(inputs, "spec", "blockDeviceMappings") if type_ == NODE_CLASS
                     else inputs.get("blockDeviceMappings"))
    return [f"block device {m.get('deviceName', '?')}: ebs.encrypted is not true"
            for m in mappings if isinstance(m, Mapping) and "ebs" in m and not enabled(dig(m, "ebs", "encrypted"))]


def fsx_encrypted(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    # Every FSx for Lustre file system is encrypted at rest; SCRATCH_1 alone cannot encrypt in transit.
    if inputs.get("deploymentType") != "SCRATCH_1":
        return []
    return ["deploymentType SCRATCH_1 does not encrypt data in transit between clients and the file system"]


def rds_encrypted(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if enabled(inputs.get("storageEncrypted")):
        return []
    return ["storageEncrypted is not true: the database, its backups and snapshots are stored unencrypted "
            "(and it cannot be turned on later without a snapshot restore)"]


def rds_not_public(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if inputs.get("publiclyAccessible") not in (True, "true"):  # private by default
        return []
    return ["publiclyAccessible is true: the database gets a public DNS name and address"]


def rds_deletion_protection(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if enabled(inputs.get("deletionProtection")):
        return []
    return ["deletionProtection is not true: a stack change or `pulumi destroy` deletes the accounting database"]


def no_world_ssh(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if type_ in INGRESS_TYPES:
        return [f"ingress from {', '.join(rule.world)} reaches port {SSH_PORT} ({rule.protocol} "
                f"{rule.from_port}-{rule.to_port})"
                for rule in ingress_of(type_, inputs) if rule.world and rule.covers(SSH_PORT)]
    if type_ == LOGIN_SET:
        # Slinky's LoginSet: the login Service is spec.service, and SSH (port 22) is what it serves.
        service = dig(inputs, "spec", "service") or {}
        problem = _load_balancer_open(dig(service, "metadata", "annotations") or {}, service.get("spec") or {})
        return [f"spec.service: {problem}"] if problem else []
    ports = [p for p in items(dig(inputs, "spec", "ports")) if isinstance(p, Mapping)]
    if not any(SSH_PORT in (p.get("port"), p.get("targetPort")) for p in ports):
        return []
    problem = _load_balancer_open(dig(inputs, "metadata", "annotations") or {}, inputs.get("spec") or {})
    return [problem] if problem else []


def _load_balancer_open(annotations: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    """Why a Service's load balancer takes SSH from the whole internet, or None."""
    if spec.get("type") != "LoadBalancer":
        return None
    if any(annotations.get(key) == value for key, value in _INTERNAL_LB.items()):
        return None  # an internal load balancer: reachable from the VPC only
    ranges = items(spec.get("loadBalancerSourceRanges"))
    if UNKNOWN in ranges or spec.get("loadBalancerSourceRanges") == UNKNOWN:
        return None
    if not ranges:
        return "an internet-facing LoadBalancer with no loadBalancerSourceRanges accepts SSH from anywhere"
    open_to = sorted(WORLD.intersection(ranges))
    return f"loadBalancerSourceRanges include {', '.join(open_to)}" if open_to else None


def _endpoint(type_: str, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
    # pulumi-eks takes the endpoint settings at the top level; aws.eks.Cluster under vpcConfig.
    return inputs if type_ == EKS_COMPONENT else (inputs.get("vpcConfig") or {})


def eks_api_not_world(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    endpoint = _endpoint(type_, inputs)
    if endpoint.get("endpointPublicAccess", True) in (False, "false"):  # public by default
        return []
    cidrs = endpoint.get("publicAccessCidrs") or ["0.0.0.0/0"]  # the whole internet by default
    if cidrs == UNKNOWN:
        return []
    open_to = sorted(WORLD.intersection(items(cidrs)))
    return [f"the public API endpoint accepts {', '.join(open_to)}"] if open_to else []


def eks_private_endpoint(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if enabled(_endpoint(type_, inputs).get("endpointPrivateAccess")):
        return []
    return ["endpointPrivateAccess is not true: nodes and pods reach the API server through its public endpoint"]


def eks_secrets_encryption(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if type_ == EKS_COMPONENT:
        encrypted = bool(inputs.get("encryptionConfigKeyArn"))
    else:
        config = inputs.get("encryptionConfig") or {}
        resources = config.get("resources")
        encrypted = bool(dig(config, "provider", "keyArn")) and (resources == UNKNOWN or "secrets" in items(resources))
    if encrypted:
        return []
    return ["no KMS key encrypts Kubernetes Secrets: they sit in etcd with only EKS's default encryption, "
            "and this cannot be added to the cluster without an update that re-encrypts every Secret"]


def node_pool_keeps_busy_nodes(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    # Every NodePool of this project backs a Slurm partition: its nodes run multi-day training jobs.
    spec = inputs.get("spec") or {}
    disruption = spec.get("disruption") or {}
    problems = []
    policy = disruption.get("consolidationPolicy", "WhenEmptyOrUnderutilized")  # Karpenter's default
    if policy != "WhenEmpty" and not _underutilized_blocked(items(disruption.get("budgets"))):
        problems.append(f"disruption.consolidationPolicy is {policy}: Karpenter may drain a node that runs a job "
                        "to pack its pods onto fewer nodes")
    expire = dig(spec, "template", "spec", "expireAfter") or "720h"  # Karpenter's default
    if expire not in ("Never", UNKNOWN):
        problems.append(f"template.spec.expireAfter is {expire}: Karpenter replaces every node at that age, "
                        "job or not (disruption budgets do not hold back expiry)")
    return problems


def _underutilized_blocked(budgets: list[Any]) -> bool:
    """A budget that always allows 0 disruptions for underutilisation: consolidation of busy nodes never runs."""
    return any(isinstance(b, Mapping) and str(b.get("nodes")) in ("0", "0%") and not b.get("schedule")
               and (not b.get("reasons") or "Underutilized" in items(b.get("reasons"))) for b in budgets)


IMDSV2_REQUIRED = ResourceRule(
    name="imdsv2-required",
    description="Nodes require IMDSv2 tokens and keep the metadata endpoint on (launch templates, EC2NodeClasses).",
    fix="set metadataOptions.httpEndpoint: enabled and httpTokens: required (and httpPutResponseHopLimit: 1 so "
        "pods cannot reach IMDS)",
    types=frozenset({LAUNCH_TEMPLATE, NODE_CLASS}),
    check=imdsv2_required,
)
EBS_ENCRYPTED = ResourceRule(
    name="ebs-encrypted",
    description="EBS volumes are encrypted: launch template and EC2NodeClass block devices, EBS StorageClasses.",
    fix="set ebs.encrypted: true on every block device mapping, and parameters.encrypted: \"true\" on EBS "
        "StorageClasses",
    types=frozenset({LAUNCH_TEMPLATE, NODE_CLASS, STORAGE_CLASS}),
    check=ebs_encrypted,
)
FSX_ENCRYPTED = ResourceRule(
    name="fsx-encrypted",
    description="FSx for Lustre encrypts data at rest and in transit (not SCRATCH_1).",
    fix="use storage.fsx.deploymentType PERSISTENT_2 (or SCRATCH_2 for throwaway data)",
    types=frozenset({FSX}),
    check=fsx_encrypted,
)
RDS_ENCRYPTED = ResourceRule(
    name="rds-encrypted",
    description="RDS storage is encrypted.",
    fix="set storageEncrypted: true on the RDS instance (an existing one needs a snapshot, encrypted copy, restore)",
    types=frozenset({RDS}),
    check=rds_encrypted,
)
RDS_NOT_PUBLIC = ResourceRule(
    name="rds-not-public",
    description="RDS instances are not publicly accessible.",
    fix="set publiclyAccessible: false; reach the database from the cluster through its security group",
    types=frozenset({RDS}),
    check=rds_not_public,
)
RDS_DELETION_PROTECTION = ResourceRule(
    name="rds-deletion-protection",
    description="RDS instances have deletion protection.",
    fix="set deletionProtection: true (turn it off in a separate change before deleting on purpose)",
    types=frozenset({RDS}),
    check=rds_deletion_protection,
)
NO_WORLD_SSH = ResourceRule(
    name="no-world-ssh",
    description="SSH (22) is not open to 0.0.0.0/0 or ::/0: security group rules and the login load balancer.",
    fix="list office/VPN ranges in slurm.login.allowedCidrs (or leave it empty for an internal NLB); only the "
        "policy pack's owners can let the login load balancer take SSH from the internet, with "
        "allowPublicLoginSsh in that stack's policy/config/<stack>.json",
    types=frozenset({*INGRESS_TYPES, SERVICE, LOGIN_SET}),
    check=no_world_ssh,
    waiver=Waiver(
        key="allowPublicLoginSsh",
        description="The Slurm login load balancer (the LoginSet's Service) of this stack may take SSH from "
                    "0.0.0.0/0 or ::/0. Security group rules stay covered.",
        covers=lambda type_, _inputs: type_ == LOGIN_SET,
    ),
)
EKS_API_NOT_WORLD = ResourceRule(
    name="eks-api-not-world",
    description="The EKS API endpoint is not open to 0.0.0.0/0 or ::/0.",
    fix="leave network.apiPublicCidrs empty (private endpoint only) or list the CI/office CIDRs in it",
    types=frozenset({EKS_COMPONENT, EKS_CLUSTER}),
    check=eks_api_not_world,
)
EKS_PRIVATE_ENDPOINT = ResourceRule(
    name="eks-private-endpoint",
    description="The EKS API has its private endpoint on, so in-VPC traffic never leaves the VPC.",
    fix="set endpointPrivateAccess: true on the cluster",
    types=frozenset({EKS_COMPONENT, EKS_CLUSTER}),
    check=eks_private_endpoint,
)
EKS_SECRETS_ENCRYPTION = ResourceRule(
    name="eks-secrets-encryption",
    description="EKS envelope-encrypts Kubernetes Secrets with a KMS key.",
    fix="pass a KMS key ARN as encryptionConfigKeyArn (pulumi-eks) or encryptionConfig (aws.eks.Cluster)",
    types=frozenset({EKS_COMPONENT, EKS_CLUSTER}),
    check=eks_secrets_encryption,
)
NODE_POOL_KEEPS_BUSY_NODES = ResourceRule(
    name="nodepool-keeps-busy-nodes",
    description="Training NodePools never consolidate busy nodes nor expire them.",
    fix="set disruption.consolidationPolicy: WhenEmpty (or an unscheduled budget nodes: \"0\" for Underutilized) "
        "and template.spec.expireAfter: Never",
    types=frozenset({NODE_POOL}),
    check=node_pool_keeps_busy_nodes,
)

RESOURCE_RULES: tuple[ResourceRule, ...] = (
    IMDSV2_REQUIRED, EBS_ENCRYPTED, FSX_ENCRYPTED, RDS_ENCRYPTED, RDS_NOT_PUBLIC, RDS_DELETION_PROTECTION,
    NO_WORLD_SSH, EKS_API_NOT_WORLD, EKS_PRIVATE_ENDPOINT, EKS_SECRETS_ENCRYPTION, NODE_POOL_KEEPS_BUSY_NODES,
)
