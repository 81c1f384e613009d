"""Rules that judge one resource by its own inputs: each a plain function (type, inputs) -> messages."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from components.config import advisory_waivers
from components.config.slinky_releases import SLINKY_REGISTRY, SLINKY_TAG, pinning_problem
from components.config.slurm_advisories import advisories_for
from components.findings import Finding
from policy.model import (
    NO_SETTINGS,
    UNKNOWN,
    Resource,
    ResourceRule,
    Setting,
    Settings,
    Waiver,
    dig,
    enabled,
    items,
    violation,
)
from policy.network import INGRESS_TYPES, WORLD, ingress_of

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
EFS = "aws:efs/fileSystem:FileSystem"
RDS = "aws:rds/instance:Instance"
EKS_COMPONENT = "eks:index:Cluster"  # pulumi-eks: all that the offline plan sees of the cluster
EKS_CLUSTER = "aws:eks/cluster:Cluster"  # its child, which `pulumi preview` also sees
SERVICE = "kubernetes:core/v1:Service"
LOGIN_SET = "kubernetes:slinky.slurm.net/v1beta1:LoginSet"
EKS_ADDON = "aws:eks/addon:Addon"

# What runs containers: pod templates of the workload kinds; the Slinky CRs, whose spec.<daemon> (slurmctld,
# slurmd, ...), reconfigure and logfile are corev1.Container objects and spec.template a pod template
# (slurm-operator v1.2.1 helm/slurm-operator-crds/templates/slinky.slurm.net_*.yaml); and mariadb-operator's
# MariaDB, whose spec.image is its server image (v26.6.0 config/crd/bases/k8s.mariadb.com_mariadbs.yaml; unset,
# the operator's default for its release).
POD_OWNERS = frozenset({
    "kubernetes:k8s.mariadb.com/v1alpha1:MariaDB",
    "kubernetes:core/v1:Pod", "kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob",
    "kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:StatefulSet", "kubernetes:apps/v1:DaemonSet",
    "kubernetes:apps/v1:ReplicaSet",
    *(f"kubernetes:slinky.slurm.net/v1beta1:{kind}" for kind in ("Controller", "Accounting", "NodeSet",
                                                                  "LoginSet", "RestApi")),
})

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


def efs_encrypted(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    # EFS encrypts at rest only when created so (the Encrypted flag of CreateFileSystem cannot change later).
    if enabled(inputs.get("encrypted")):
        return []
    return ["encrypted is not true: the file system stores its data unencrypted at rest, and only a new, "
            "encrypted file system (and a copy of the data) can fix that"]


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
    # Every NodePool of this project backs a Slurm partition or a Kubernetes pool (components/compute/nodepools.py
    # builds both): their nodes run multi-day training jobs, Slurm's or a RayCluster's / MPIJob's.
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
    grace = dig(spec, "template", "spec", "terminationGracePeriod")
    if grace is not None:
        # kubernetes-sigs/karpenter v1.14.1 pkg/controllers/disruption/types.go NewCandidate: with a grace period,
        # drift and expiry take nodes whose pods block eviction (a busy slurmd's PodDisruptionBudget).
        problems.append(f"template.spec.terminationGracePeriod is {grace}: drift then replaces nodes whose slurmd "
                        "pod runs a job, PodDisruptionBudget or not, once the grace period ends")
    return problems


def _underutilized_blocked(budgets: list[Any]) -> bool:
    """A budget that always allows 0 disruptions for underutilisation: consolidation of busy nodes never runs."""
    return any(isinstance(b, Mapping) and str(b.get("nodes")) in ("0", "0%") and not b.get("schedule")
               and (not b.get("reasons") or "Underutilized" in items(b.get("reasons"))) for b in budgets)


def images_pinned(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    return [f"{path}: {image} is not pinned: {problem}" for path, image in _images(inputs.get("spec"), "spec")
            if image != UNKNOWN and (problem := pinning_problem(image))]


def slurm_patched(type_: str, inputs: Mapping[str, Any], settings: Settings = NO_SETTINGS,
                  today: date | None = None) -> list[str]:
    """Slinky's images name their Slurm release in the tag (<patch>-<os>): one a security advisory affects is
    refused wherever a pod or CR runs it, whatever config or hand-written resource put it there, unless the stack's
    pack config waives that advisory until a day not yet past (components/config/advisory_waivers.py)."""
    try:
        waivers = advisory_waivers.from_settings(settings)
    except advisory_waivers.WaiverError as exc:
        return [f"advisory waiver: {exc}"]
    day = today or datetime.now(UTC).date()
    found = []
    for path, image in _images(inputs.get("spec"), "spec"):
        m = SLINKY_TAG.match(image.rsplit(":", 1)[-1]) if image.startswith(f"{SLINKY_REGISTRY}/") else None
        advisories = advisories_for(m["patch"]) if m and "@" not in image else []
        found += [f"{path}: {image} runs Slurm {m['patch']}, affected by {v.advisory.summary()}{v.note()}"
                  + (f" ({advisory_waivers.RENEW})" if v.expired else "")
                  for v in advisory_waivers.judge(advisories, waivers, day) if m and not v.waived]
    return found


def _images(value: Any, path: str) -> list[tuple[str, str]]:
    """Every `image: <string>` under value (containers, init containers, Slinky's spec.<daemon>.image)."""
    if isinstance(value, Mapping):
        found = [(f"{path}.image", value["image"])] if isinstance(value.get("image"), str) else []
        return found + [hit for key, v in value.items() if key != "image" for hit in _images(v, f"{path}.{key}")]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in _images(v, f"{path}[{i}]")]
    return []


def eks_addon_pinned(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if inputs.get("addonVersion"):
        return []
    return [f"the {inputs.get('addonName', '?')} add-on has no addonVersion: EKS installs its default version, "
            "which changes under the same code"]




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
EFS_ENCRYPTED = ResourceRule(
    name="efs-encrypted",
    description="EFS file systems are encrypted at rest.",
    fix="set encrypted: true on the EFS file system (components/storage/efs.py does; an existing one must be "
        "recreated)",
    types=frozenset({EFS}),
    check=efs_encrypted,
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
    description="Training NodePools (partitions and Kubernetes pools) never consolidate busy nodes nor expire them.",
    fix="set disruption.consolidationPolicy: WhenEmpty (or an unscheduled budget nodes: \"0\" for Underutilized), "
        "template.spec.expireAfter: Never, and no template.spec.terminationGracePeriod",
    types=frozenset({NODE_POOL}),
    check=node_pool_keeps_busy_nodes,
)
IMAGES_PINNED = ResourceRule(
    name="images-pinned",
    description="Every container image of a pod template or Slinky CR is a digest or an exact release tag "
                "(of Slinky's registry: a <patch>-<os> tag of a release Slinky built).",
    fix="name the image by digest (repo@sha256:...) or by an exact patch tag, e.g. "
        "ghcr.io/slinkyproject/slurmd-pyxis:25.11.8-ubuntu24.04 (slurm.images / partitions.<name>.image)",
    types=POD_OWNERS,
    check=images_pinned,
)
SLURM_PATCHED = ResourceRule(
    name="slurm-patched",
    description="No pod or Slinky CR runs a Slurm release that a SchedMD security advisory affects "
                "(components/config/slurm_advisories.py).",
    fix='use slurm.version "25.11" (the patched release the project pins) or a release at or after the fix the '
        "message names, and no slurm.images tag of an affected release",
    types=POD_OWNERS,
    check=slurm_patched,
    setting=Setting(key=advisory_waivers.PROPERTY, schema=advisory_waivers.SCHEMA, parse=advisory_waivers.parse),
    configured_check=slurm_patched,
)

EKS_ADDON_PINNED = ResourceRule(
    name="eks-addon-pinned",
    description="Every EKS add-on is installed at a pinned addonVersion.",
    fix="set addonVersion from components/config/addon_versions.py ADDON_VERSIONS (the EKS user guide's table per "
        "Kubernetes version)",
    types=frozenset({EKS_ADDON}),
    check=eks_addon_pinned,
    # The EBS CSI driver's add-on versions per Kubernetes version are published only through the EKS API
    # (`aws eks describe-addon-versions`), not in the user guide or the driver's repository, so no version
    # could be read offline for this release; the waiver is granted until one is pinned from that API.
    waiver=Waiver(
        key="allowUnpinnedEbsCsiAddon",
        description="The aws-ebs-csi-driver add-on of this stack may run the version EKS installs by default.",
        covers=lambda _type, inputs: inputs.get("addonName") == "aws-ebs-csi-driver",
    ),
)

RDS_PARAMETER_GROUP = "aws:rds/parameterGroup:ParameterGroup"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"


def rds_managed_password(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    problems = []
    if not enabled(inputs.get("manageMasterUserPassword")):
        problems.append("manageMasterUserPassword is not true: the master password is Pulumi's to keep, in its state")
    if inputs.get("password") not in (None, ""):
        problems.append("password is set: the master password is an input, so it is in Pulumi's state")
    return problems


def rds_require_tls(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if not str(inputs.get("family") or "").startswith(("mariadb", "mysql")):
        return []
    parameters = [p for p in items(inputs.get("parameters")) if isinstance(p, Mapping)]
    values = {str(p.get("name")): str(p.get("value")) for p in parameters}
    if values.get("require_secure_transport", "").upper() in ("ON", "1", UNKNOWN.upper()):
        return []
    return ["require_secure_transport is not ON: clients may log in without TLS (RDS's default up to MariaDB 11.4)"]






def s3_endpoint_scoped(type_: str, inputs: Mapping[str, Any]) -> list[str]:
    if not str(inputs.get("serviceName", "")).endswith(".s3"):
        return []
    policy = inputs.get("policy")
    if policy == UNKNOWN:
        return []
    if not policy:
        return ["no policy: the endpoint admits every bucket, so data can leave to any account's bucket"]
    document = json.loads(policy) if isinstance(policy, str) else policy
    problems = []
    for statement in items(document.get("Statement")):
        if not isinstance(statement, Mapping) or statement.get("Effect") != "Allow":
            continue
        actions = [str(a) for a in _one_or_many(statement.get("Action"))]
        object_access = any(a in ("*", "s3:*") or a.startswith(("s3:Get", "s3:Put")) for a in actions)
        if object_access and "*" in _one_or_many(statement.get("Resource")):
            problems.append(f"statement {statement.get('Sid', '?')} allows {', '.join(actions)} on Resource *")
    return problems


def _one_or_many(value: Any) -> list[Any]:
    """An IAM policy element, which may be one string or a list of them."""
    return [value] if isinstance(value, str) else items(value)


RDS_MANAGED_PASSWORD = ResourceRule(
    name="rds-managed-password",
    description="RDS keeps the master password in Secrets Manager; no password input (it would be in the state).",
    fix="set manageMasterUserPassword: true and remove password",
    types=frozenset({RDS}),
    check=rds_managed_password,
)
RDS_REQUIRE_TLS = ResourceRule(
    name="rds-require-tls",
    description="MariaDB/MySQL parameter groups set require_secure_transport ON.",
    fix="add the parameter require_secure_transport = ON to the parameter group",
    types=frozenset({RDS_PARAMETER_GROUP}),
    check=rds_require_tls,
)
S3_ENDPOINT_SCOPED = ResourceRule(
    name="s3-endpoint-scoped",
    description="The S3 gateway endpoint has a policy naming its buckets, never Resource * for object access.",
    fix="give the endpoint a policy listing the stack's buckets and ECR's layer bucket (components/aws/vpc.py)",
    types=frozenset({VPC_ENDPOINT}),
    check=s3_endpoint_scoped,
)

NAMESPACE = "kubernetes:core/v1:Namespace"
PSA_ENFORCE = "pod-security.kubernetes.io/enforce"
PSA_LEVELS = ("privileged", "baseline", "restricted")  # kubernetes.io/docs/concepts/security/pod-security-standards
PRIVILEGED_NAMESPACES = "privilegedNamespaces"


def namespace_pod_security(type_: str, inputs: Mapping[str, Any], settings: Settings) -> list[str]:
    name, labels = dig(inputs, "metadata", "name"), dig(inputs, "metadata", "labels") or {}
    if UNKNOWN in (name, labels):
        return []
    level = labels.get(PSA_ENFORCE) if isinstance(labels, Mapping) else None
    if level is None:
        return [f"namespace {name} has no {PSA_ENFORCE} label: its pods get the cluster's default level, which is "
                "privileged on EKS"]
    if level == UNKNOWN:
        return []
    if level not in PSA_LEVELS:
        return [f"{PSA_ENFORCE}={level!r} is not a Pod Security level ({', '.join(PSA_LEVELS)})"]
    reason = (settings.get(PRIVILEGED_NAMESPACES) or {}).get(name)
    if level == "privileged" and not (isinstance(reason, str) and reason.strip()):
        return [f"namespace {name} enforces Pod Security privileged (any pod, host access included), and the pack "
                f"config does not list it under {PRIVILEGED_NAMESPACES} with a reason"]
    return []


@dataclass(frozen=True, kw_only=True)
class ListedExceptionsRule(ResourceRule):
    """A resource rule whose exceptions the pack's owners list by name, each with its reason, in one object
    property of the stack's pack config (policy/config/<stack>.json). `check` is the rule with none listed."""

    exceptions: str  # the config property: {name: reason}
    exceptions_description: str
    check_listed: Callable[[str, Mapping[str, Any], Settings], list[str]]

    @property
    def config_schema(self) -> dict[str, dict[str, Any]]:
        return {self.exceptions: {"type": "object", "additionalProperties": {"type": "string", "minLength": 1},
                                  "default": {}, "description": self.exceptions_description}}

    def evaluate(self, resource: Resource, settings: Settings = NO_SETTINGS) -> list[Finding]:
        if resource.type not in self.types:
            return []
        return [violation(self, resource.urn, m) for m in self.check_listed(resource.type, resource.inputs, settings)]


NAMESPACE_POD_SECURITY = ListedExceptionsRule(
    name="namespace-pod-security",
    description="Every Namespace enforces a Pod Security level; `privileged` only where the pack's owners list "
                "the namespace with a reason.",
    fix="label the namespace pod-security.kubernetes.io/enforce: restricted or baseline "
        "(components/kubernetes/namespaces.py POD_SECURITY); only the policy pack's owners can allow privileged, "
        "with the namespace and its reason under "
        f"{PRIVILEGED_NAMESPACES} in policy/config/<stack>.json",
    types=frozenset({NAMESPACE}),
    check=lambda type_, inputs: namespace_pod_security(type_, inputs, NO_SETTINGS),
    exceptions=PRIVILEGED_NAMESPACES,
    exceptions_description="Namespaces of this stack that may enforce Pod Security privileged: name -> why.",
    check_listed=namespace_pod_security,
)

RESOURCE_RULES: tuple[ResourceRule, ...] = (
    IMDSV2_REQUIRED, EBS_ENCRYPTED, FSX_ENCRYPTED, EFS_ENCRYPTED, RDS_ENCRYPTED, RDS_NOT_PUBLIC,
    RDS_DELETION_PROTECTION,
    NO_WORLD_SSH, EKS_API_NOT_WORLD, EKS_PRIVATE_ENDPOINT, EKS_SECRETS_ENCRYPTION, NODE_POOL_KEEPS_BUSY_NODES,
    IMAGES_PINNED, SLURM_PATCHED, EKS_ADDON_PINNED,
    RDS_MANAGED_PASSWORD, RDS_REQUIRE_TLS, S3_ENDPOINT_SCOPED,
    NAMESPACE_POD_SECURITY,
)
