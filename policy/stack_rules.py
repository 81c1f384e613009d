"""Rules that relate resources to each other: each a plain function (all resources) -> (urn, message)s.

Resources are linked through their dependencies (URNs), which both the offline plan and `pulumi preview`
know even while IDs are not yet known: a rule that attaches to a bucket or a security group depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.model import UNKNOWN, Enforcement, Resource, StackRule, dig, items
from policy.network import SECURITY_GROUP, ingress_of
from policy.rules import FSX, RDS

NODE_SET = "kubernetes:slinky.slurm.net/v1beta1:NodeSet"
BUCKETS = frozenset({"aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"})
PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_ENCRYPTION = frozenset({
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
})
BLOCK_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
PUBLIC_ACLS = frozenset({"public-read", "public-read-write", "authenticated-read"})
_GUARDED = {FSX: "FSx for Lustre", RDS: "the RDS database"}

Finding = tuple[str, str]


def storage_cluster_only(resources: Sequence[Resource]) -> list[Finding]:
    groups = {r.urn for r in resources if r.type == SECURITY_GROUP}
    guards: dict[str, str] = {}  # security group URN -> what it guards
    for r in resources:
        if r.type in _GUARDED:
            guards.update((d, _GUARDED[r.type]) for d in r.dependencies if d in groups)
    findings = []
    for r in resources:
        # A rule with an address source references no other group, so the group it depends on is its target.
        targets = {r.urn} if r.type == SECURITY_GROUP else {d for d in r.dependencies if d in groups}
        for guarded in sorted(targets & guards.keys()):
            findings += [(r.urn, f"ingress from {', '.join(rule.sources)} reaches the security group of "
                                 f"{guards[guarded]}: only security groups of the cluster may")
                         for rule in ingress_of(r.type, r.inputs) if rule.sources]
    return findings


def _attached(resources: Sequence[Resource], types: frozenset[str], target: Resource) -> list[Resource]:
    return [r for r in resources if r.type in types and target.urn in r.dependencies]


def s3_public_access_blocked(resources: Sequence[Resource]) -> list[Finding]:
    findings = []
    for bucket in (r for r in resources if r.type in BUCKETS):
        if bucket.inputs.get("acl") in PUBLIC_ACLS:
            findings.append((bucket.urn, f"acl is {bucket.inputs['acl']}"))
        blocks = _attached(resources, frozenset({PUBLIC_ACCESS_BLOCK}), bucket)
        if not blocks:
            findings.append((bucket.urn, "no BucketPublicAccessBlock: a bucket policy or ACL can make it public"))
        for block in blocks:
            off = [f for f in BLOCK_FLAGS if block.inputs.get(f) not in (True, "true", UNKNOWN)]
            if off:
                findings.append((block.urn, f"{', '.join(off)} not true on the bucket's public access block"))
    return findings


def s3_encrypted(resources: Sequence[Resource]) -> list[Finding]:
    findings = []
    for bucket in (r for r in resources if r.type in BUCKETS):
        inline = dig(bucket.inputs, "serverSideEncryptionConfiguration", "rule", "applyServerSideEncryptionByDefault",
                     "sseAlgorithm")
        attached = [dig(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm")
                    for config in _attached(resources, BUCKET_ENCRYPTION, bucket)
                    for rule in items(config.inputs.get("rules"))]
        if not inline and not any(attached):
            findings.append((bucket.urn, "no server-side encryption configuration: objects get S3's default "
                                         "SSE-S3 at best, with no key this project controls"))
    return findings














STORAGE_CLUSTER_ONLY = StackRule(
    name="storage-cluster-only",
    description="FSx and RDS are reachable only from the cluster: their security groups admit security groups, "
                "never CIDR blocks or prefix lists.",
    fix="replace the CIDR rule with one whose source is the cluster's security group (referencedSecurityGroupId)",
    check=storage_cluster_only,
)
S3_PUBLIC_ACCESS_BLOCKED = StackRule(
    name="s3-public-access-blocked",
    description="S3 buckets are private: a public access block with all four settings on, no public ACL.",
    fix="add an aws.s3.BucketPublicAccessBlock for the bucket with block_public_acls, block_public_policy, "
        "ignore_public_acls and restrict_public_buckets all True",
    check=s3_public_access_blocked,
)
S3_ENCRYPTED = StackRule(
    name="s3-encrypted",
    description="S3 buckets declare server-side encryption (advisory: S3 applies SSE-S3 to new objects anyway).",
    fix="add an aws.s3.BucketServerSideEncryptionConfiguration with sse_algorithm aws:kms (or AES256)",
    check=s3_encrypted,
    enforcement=Enforcement.advisory,
)

NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"


def _created_namespaces(resources: Sequence[Resource]) -> dict[str, str]:
    """Namespace name -> the URN that creates it: Namespace objects and Helm releases with createNamespace."""
    found: dict[str, str] = {}
    for r in resources:
        if r.type == NAMESPACE and isinstance(dig(r.inputs, "metadata", "name"), str):
            found.setdefault(dig(r.inputs, "metadata", "name"), r.urn)
        elif r.type == HELM_RELEASE and r.inputs.get("createNamespace") in (True, "true") \
                and isinstance(r.inputs.get("namespace"), str):
            found.setdefault(r.inputs["namespace"], r.urn)
    return found


def _denies_all(inputs: Mapping[str, Any]) -> bool:
    """Selects every pod (an empty podSelector), isolates both ways, admits nothing (networking.k8s.io/v1)."""
    spec = inputs.get("spec") or {}
    selector = spec.get("podSelector")
    return (isinstance(selector, Mapping) and not selector.get("matchLabels") and not selector.get("matchExpressions")
            and {"Ingress", "Egress"} <= set(items(spec.get("policyTypes")))
            and not items(spec.get("ingress")) and not items(spec.get("egress")))


def namespace_default_deny(resources: Sequence[Resource]) -> list[Finding]:
    denied = {dig(r.inputs, "metadata", "namespace") for r in resources
              if r.type == NETWORK_POLICY and _denies_all(r.inputs)}
    return [(urn, f"namespace {name} has no default-deny NetworkPolicy: every pod in it takes and sends any "
                  "traffic that no other policy isolates")
            for name, urn in sorted(_created_namespaces(resources).items()) if name not in denied]


NAMESPACE_DEFAULT_DENY = StackRule(
    name="namespace-default-deny",
    description="Every namespace the program creates has a NetworkPolicy selecting all its pods for Ingress and "
                "Egress with no rules, so only flows allowed on purpose pass.",
    fix="add the namespace to components/segmentation/network_policies.py (a default-deny policy, then one "
        "allow per flow)",
    check=namespace_default_deny,
)

VPC = "aws:ec2/vpc:Vpc"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"


def vpc_flow_log(resources: Sequence[Resource]) -> list[Finding]:
    """A VPC this stack creates has a flow log that depends on it (an adopted VPC's is its owner's business)."""
    return [(vpc.urn, "no flow log: nobody can tell afterwards which addresses talked to the cluster")
            for vpc in resources if vpc.type == VPC and not _attached(resources, frozenset({FLOW_LOG}), vpc)]


VPC_FLOW_LOG = StackRule(
    name="vpc-flow-log",
    description="Every VPC the stack creates records flow logs.",
    fix="add an aws.ec2.FlowLog for the VPC (components/aws/vpc.py does, to CloudWatch Logs)",
    check=vpc_flow_log,
)

STACK_RULES: tuple[StackRule, ...] = (
    STORAGE_CLUSTER_ONLY, S3_PUBLIC_ACCESS_BLOCKED, S3_ENCRYPTED, NAMESPACE_DEFAULT_DENY,
    VPC_FLOW_LOG,
)
