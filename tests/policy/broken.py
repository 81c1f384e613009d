"""Plans that break one rule each: a shipped plan with one resource mutated, or tiny hand-made resources.

Each case returns the plan and the URN the rule must flag; tests/policy checks both the offline engine and
the online pack against the same cases.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scripts.offline.plan_model import Plan, PlannedResource
from tests.plan.fixtures import one, shipped_plan

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SG = "aws:ec2/securityGroup:SecurityGroup"
EKS = "eks:index:Cluster"
RDS = "aws:rds/instance:Instance"
BUCKET = "aws:s3/bucket:Bucket"
PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
ALL_BLOCKED = dict.fromkeys(("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"),
                            True)


def prod() -> Plan:
    return copy.deepcopy(shipped_plan("prod"))


def resource(type_: str, name: str, inputs: dict[str, Any], dependencies: tuple[str, ...] = ()) -> PlannedResource:
    return PlannedResource(urn=f"urn:pulumi:test::slurm-eks::{type_}::{name}", type=type_, name=name, parent=None,
                           provider=None, dependencies=list(dependencies), custom=True, protect=False,
                           retain_on_delete=False, inputs=inputs)


def hand_made(*resources: PlannedResource) -> Plan:
    return Plan(stack="test", project="slurm-eks", resources=list(resources))


@dataclass(frozen=True)
class Case:
    rule: str
    what: str
    make: Callable[[], tuple[Plan, str]]  # the broken plan, and the URN the rule must flag

    def __str__(self) -> str:
        return f"{self.rule}: {self.what}"


def _mutate(type_: str, name: str | None, change: Callable[[dict[str, Any]], Any]) -> Callable[[], tuple[Plan, str]]:
    def make() -> tuple[Plan, str]:
        plan = prod()
        target = one(plan, type_, name)
        change(target.inputs)
        return plan, target.urn
    return make


def _login_service(inputs: dict[str, Any]) -> dict[str, Any]:
    return inputs["spec"]["service"]


def _open_login(inputs: dict[str, Any], ranges: list[str]) -> None:
    service = _login_service(inputs)
    service["metadata"]["annotations"].pop("service.beta.kubernetes.io/aws-load-balancer-internal", None)
    service["spec"]["loadBalancerSourceRanges"] = ranges


def _login_annotated_as_meant(inputs: dict[str, Any]) -> None:
    _open_login(inputs, ["0.0.0.0/0"])
    _login_service(inputs)["metadata"]["annotations"]["slurm-eks.io/allow-public-ssh"] = "true"


def _cidr_instead_of_group(inputs: dict[str, Any], cidr: str, port: int | None = None) -> None:
    inputs.pop("referencedSecurityGroupId")
    inputs["cidrIpv4"] = cidr
    if port is not None:
        inputs.update(fromPort=port, toPort=port)


def _requirement(inputs: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in inputs["spec"]["template"]["spec"]["requirements"] if r["key"] == key)


def _world_ssh_rule() -> tuple[Plan, str]:
    # A CIDR rule depends only on the group it opens (no referenced group any more): the plan says so too.
    plan = prod()
    rule = one(plan, INGRESS, "slurm-db-from-nodes")
    _cidr_instead_of_group(rule.inputs, "0.0.0.0/0", port=22)
    rule.dependencies = [d for d in rule.dependencies if d.endswith("::slurm-db-sg")]
    return plan, rule.urn


def _fsx_from_cidr() -> tuple[Plan, str]:
    plan = prod()
    rule = one(plan, INGRESS, "storage-fsx-nodes-988")
    _cidr_instead_of_group(rule.inputs, "10.0.0.0/8")
    rule.dependencies = [d for d in rule.dependencies if d.endswith("::storage-fsx")]
    return plan, rule.urn


def _fsx_inline_cidr() -> tuple[Plan, str]:
    plan = prod()
    group = one(plan, SG, "storage-fsx")
    group.inputs["ingress"] = [{"protocol": "tcp", "fromPort": 988, "toPort": 988, "cidrBlocks": ["10.0.0.0/16"]}]
    return plan, group.urn


def _ssh_service() -> tuple[Plan, str]:
    service = resource("kubernetes:core/v1:Service", "login", {"metadata": {"name": "login"}, "spec": {
        "type": "LoadBalancer", "ports": [{"port": 22}], "loadBalancerSourceRanges": ["::/0"]}})
    return hand_made(service), service.urn


def _aws_eks_cluster_unencrypted() -> tuple[Plan, str]:
    cluster = resource("aws:eks/cluster:Cluster", "eks-cluster", {
        "vpcConfig": {"endpointPrivateAccess": True, "endpointPublicAccess": False},
        "encryptionConfig": {"provider": {"keyArn": "arn:aws:kms:us-west-2:123456789012:key/x"},
                             "resources": ["configmaps"]}})
    return hand_made(cluster), cluster.urn


def _namespace_with_policy(spec: dict[str, Any]) -> tuple[Plan, str]:
    namespace = resource("kubernetes:core/v1:Namespace", "slurm", {"metadata": {"name": "slurm"}})
    deny = resource("kubernetes:networking.k8s.io/v1:NetworkPolicy", "deny",
                    {"metadata": {"name": "default-deny", "namespace": "slurm"}, "spec": spec})
    return hand_made(namespace, deny), namespace.urn


def _hand_made_one(target: PlannedResource) -> tuple[Plan, str]:
    return hand_made(target), target.urn


def _bucket(**inputs: Any) -> PlannedResource:
    return resource(BUCKET, "data", {"bucket": "ml-data", **inputs})


def _bucket_without_block() -> tuple[Plan, str]:
    bucket = _bucket()
    return hand_made(bucket, resource(SSE, "data-sse", _sse("aws:kms"), (bucket.urn,))), bucket.urn


def _block_with_policy_allowed() -> tuple[Plan, str]:
    bucket = _bucket()
    block = resource(PAB, "data-pab", {**ALL_BLOCKED, "blockPublicPolicy": False}, (bucket.urn,))
    return hand_made(bucket, block), block.urn


def _public_acl() -> tuple[Plan, str]:
    bucket = _bucket(acl="public-read")
    return hand_made(bucket, resource(PAB, "data-pab", ALL_BLOCKED, (bucket.urn,))), bucket.urn


def _sse(algorithm: str) -> dict[str, Any]:
    return {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": algorithm}}]}


def _bucket_unencrypted() -> tuple[Plan, str]:
    bucket = _bucket()
    return hand_made(bucket, resource(PAB, "data-pab", ALL_BLOCKED, (bucket.urn,))), bucket.urn


def _scheduled_zero_budget(inputs: dict[str, Any]) -> None:
    """Underutilized consolidation blocked 8 hours a day: the other 16 it drains busy nodes."""
    disruption = inputs["spec"]["disruption"]
    disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
    disruption["budgets"].append({"nodes": "0", "reasons": ["Underutilized"], "schedule": "0 9 * * *",
                                  "duration": "8h"})


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        for key in path[:-1]:
            inputs = inputs[key]
        inputs[path[-1]] = value
    return change


def _drop(*path: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        for key in path[:-1]:
            inputs = inputs[key]
        del inputs[path[-1]]
    return change


def _without_repair_scope() -> tuple[Plan, str]:
    plan = prod()
    plan.resources = [r for r in plan.resources if not r.name.startswith("repair-scope")]
    return plan, one(plan, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                     "repair-cluster-binding").urn


def _vpc_without_flow_log() -> tuple[Plan, str]:
    plan = prod()
    plan.resources = [r for r in plan.resources if r.type != "aws:ec2/flowLog:FlowLog"]
    return plan, one(plan, "aws:ec2/vpc:Vpc").urn


CASES: tuple[Case, ...] = (
    Case("imdsv2-required", "launch template allows IMDSv1",
         _mutate(LT, "eks-system", _set(("metadataOptions", "httpTokens"), "optional"))),
    Case("imdsv2-required", "launch template without metadataOptions",
         _mutate(LT, "eks-system", _drop("metadataOptions"))),
    Case("imdsv2-required", "EC2NodeClass allows IMDSv1",
         _mutate(NODE_CLASS, "partition-gpu-h100-nodeclass",
                 _set(("spec", "metadataOptions", "httpTokens"), "optional"))),
    # Without the endpoint nodeadm cannot bootstrap: a node that never joins, which hop limit 1 does not need.
    Case("imdsv2-required", "EC2NodeClass turns the metadata endpoint off",
         _mutate(NODE_CLASS, "partition-gpu-h100-nodeclass",
                 _set(("spec", "metadataOptions", "httpEndpoint"), "disabled"))),
    Case("imdsv2-required", "launch template turns the metadata endpoint off",
         _mutate(LT, "eks-system", _set(("metadataOptions", "httpEndpoint"), "disabled"))),
    Case("ebs-encrypted", "launch template root volume unencrypted",
         _mutate(LT, "eks-system", lambda i: i["blockDeviceMappings"][0]["ebs"].update(encrypted="false"))),
    Case("ebs-encrypted", "EC2NodeClass root volume without encrypted",
         _mutate(NODE_CLASS, "partition-trainium-nodeclass",
                 lambda i: i["spec"]["blockDeviceMappings"][0]["ebs"].pop("encrypted"))),
    Case("ebs-encrypted", "EBS StorageClass without encrypted",
         _mutate("kubernetes:storage.k8s.io/v1:StorageClass", "slurm-state-gp3", _drop("parameters", "encrypted"))),
    Case("fsx-encrypted", "SCRATCH_1 file system",
         _mutate("aws:fsx/lustreFileSystem:LustreFileSystem", None, _set(("deploymentType",), "SCRATCH_1"))),
    Case("efs-encrypted", "model file system not encrypted",
         _mutate("aws:efs/fileSystem:FileSystem", None, _set(("encrypted",), False))),
    Case("rds-encrypted", "storage not encrypted", _mutate(RDS, None, _set(("storageEncrypted",), False))),
    Case("rds-not-public", "publicly accessible", _mutate(RDS, None, _set(("publiclyAccessible",), True))),
    Case("rds-not-public", "publicly accessible as the string \"true\"",
         _mutate(RDS, None, _set(("publiclyAccessible",), "true"))),
    Case("rds-deletion-protection", "no deletion protection", _mutate(RDS, None, _drop("deletionProtection"))),
    Case("no-world-ssh", "login NLB internet-facing for 0.0.0.0/0",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:LoginSet", None, lambda i: _open_login(i, ["0.0.0.0/0"]))),
    Case("no-world-ssh", "login NLB internet-facing without source ranges",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:LoginSet", None, lambda i: _open_login(i, []))),
    # What 0.0.0.0/0 in slurm.login.allowedCidrs puts on the Service: only the pack's owners can waive the rule.
    Case("no-world-ssh", "login NLB for 0.0.0.0/0 annotated by the stack as meant",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:LoginSet", None, _login_annotated_as_meant)),
    Case("no-world-ssh", "security group rule 22 from 0.0.0.0/0", _world_ssh_rule),
    Case("no-world-ssh", "plain Service on 22 for ::/0", _ssh_service),
    Case("eks-api-not-world", "public endpoint with default CIDRs",
         _mutate(EKS, None, lambda i: (i.update(endpointPublicAccess=True), i.pop("publicAccessCidrs", None)))),
    # EKS defaults endpointPublicAccess to true (AWS EKS API reference, VpcConfigRequest).
    Case("eks-api-not-world", "endpointPublicAccess unset, CIDRs open to the world",
         _mutate(EKS, None, lambda i: (i.pop("endpointPublicAccess", None),
                                       i.update(publicAccessCidrs=["0.0.0.0/0"])))),
    Case("eks-private-endpoint", "private endpoint off", _mutate(EKS, None, _set(("endpointPrivateAccess",), False))),
    Case("eks-secrets-encryption", "no KMS key", _mutate(EKS, None, _drop("encryptionConfigKeyArn"))),
    Case("eks-addon-pinned", "CoreDNS at EKS's default version",
         _mutate("aws:eks/addon:Addon", "eks-coredns", _drop("addonVersion"))),
    Case("eks-secrets-encryption", "aws.eks.Cluster encrypting configmaps only", _aws_eks_cluster_unencrypted),
    Case("nodepool-keeps-busy-nodes", "consolidates underutilized nodes",
         _mutate(NODE_POOL, "partition-gpu-a100-nodepool",
                 _set(("spec", "disruption", "consolidationPolicy"), "WhenEmptyOrUnderutilized"))),
    Case("nodepool-keeps-busy-nodes", "expires nodes after 30 days",
         _mutate(NODE_POOL, "partition-gpu-a100-nodepool", _set(("spec", "template", "spec", "expireAfter"), "720h"))),
    # Karpenter v1.14.1's defaults, which the rule must not take for safe (aws/karpenter-provider-aws
    # pkg/apis/crds/karpenter.sh_nodepools.yaml: consolidationPolicy WhenEmptyOrUnderutilized, expireAfter 720h).
    Case("nodepool-keeps-busy-nodes", "consolidationPolicy unset",
         _mutate(NODE_POOL, "partition-gpu-a100-nodepool", _drop("spec", "disruption", "consolidationPolicy"))),
    Case("nodepool-keeps-busy-nodes", "expireAfter unset",
         _mutate(NODE_POOL, "partition-gpu-a100-nodepool", _drop("spec", "template", "spec", "expireAfter"))),
    Case("nodepool-keeps-busy-nodes", "Underutilized held back by a 0-node budget only on a schedule",
         _mutate(NODE_POOL, "partition-gpu-a100-nodepool", _scheduled_zero_budget)),
    Case("nodepool-keeps-busy-nodes", "a termination grace period (drift then ignores busy nodes' PDBs)",
         _mutate(NODE_POOL, "partition-gpu-a100-nodepool",
                 _set(("spec", "template", "spec", "terminationGracePeriod"), "48h"))),
    Case("storage-cluster-only", "FSx reachable from a CIDR (ingress rule)", _fsx_from_cidr),
    Case("storage-cluster-only", "FSx reachable from a CIDR (inline ingress)", _fsx_inline_cidr),
    Case("s3-public-access-blocked", "bucket without a public access block", _bucket_without_block),
    Case("s3-public-access-blocked", "public access block allows bucket policies", _block_with_policy_allowed),
    Case("s3-public-access-blocked", "public-read ACL", _public_acl),
    Case("s3-encrypted", "bucket without SSE configuration", _bucket_unencrypted),
    Case("images-pinned", "NodeSet slurmd on Slinky's moving <series>-<os> tag",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:NodeSet", "slurm-nodeset-gpu-h100",
                 _set(("spec", "slurmd", "image"), "ghcr.io/slinkyproject/slurmd-pyxis:25.11-ubuntu24.04"))),
    # What the Slinky chart gives the logfile sidecar when the CR names none (components/slinky/specs.py).
    Case("images-pinned", "Controller logfile sidecar on alpine:latest",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:Controller", None, _set(("spec", "logfile", "image"),
                                                                              "alpine:latest"))),
    Case("images-pinned", "Job container on a patch Slinky never built",
         _mutate("kubernetes:batch/v1:Job", "slurm-accounts-reconcile",
                 lambda i: i["spec"]["template"]["spec"]["containers"][0].update(
                     image="ghcr.io/slinkyproject/login-pyxis:25.11.9-ubuntu24.04"))),
    Case("slurm-patched", "NodeSet slurmd on 25.11.7 (before the 2026-09 security release)",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:NodeSet", "slurm-nodeset-gpu-h100",
                 _set(("spec", "slurmd", "image"), "ghcr.io/slinkyproject/slurmd-pyxis:25.11.7-ubuntu24.04"))),
    Case("slurm-patched", "Controller on 25.11.6",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:Controller", None,
                 _set(("spec", "slurmctld", "image"), "ghcr.io/slinkyproject/slurmctld:25.11.6-ubuntu24.04"))),
    Case("jobs-isolated", "no NamespaceType: jobs share /tmp and /dev/shm",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:Controller", None, lambda i: i["spec"].update(
             extraConf=i["spec"]["extraConf"].replace("NamespaceType=namespace/tmpfs\n", "")))),
    Case("jobs-isolated", "PrologFlags without Contain",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:Controller", None, lambda i: i["spec"].update(
             extraConf=i["spec"]["extraConf"].replace("PrologFlags=Alloc,Contain", "PrologFlags=Alloc")))),
    Case("jobs-isolated", "tokens without a lifespan bound",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:Controller", None, lambda i: i["spec"].update(
             extraConf=i["spec"]["extraConf"].replace("AuthAltParameters=max_token_lifespan=86400\n", "")))),
    Case("devices-not-shared", "a Trainium partition shared between people",
         _mutate("kubernetes:slinky.slurm.net/v1beta1:NodeSet", "slurm-nodeset-trainium", lambda i: i["spec"][
             "partition"].update(config=i["spec"]["partition"]["config"].replace(" ExclusiveUser=YES", "")))),
    Case("hub-over-tls", "the hub's NLB in plain HTTP",
         _mutate("kubernetes:helm.sh/v3:Release", "jupyterhub", lambda i: i["values"]["proxy"].update(
             https={"enabled": False}))),
    Case("node-writers-scoped", "the repair agent without its admission policy", lambda: _without_repair_scope()),
    Case("images-pinned", "MariaDB server on a major.minor tag", lambda: _hand_made_one(
        resource("kubernetes:k8s.mariadb.com/v1alpha1:MariaDB", "db", {"spec": {"image": "mariadb:11.4"}}))),
    Case("namespace-default-deny", "the slurm namespace's deny-all admits egress anywhere",
         lambda: _namespace_with_policy({"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "egress": [{}]})),
    Case("namespace-default-deny", "a deny-all that isolates ingress only",
         lambda: _namespace_with_policy({"podSelector": {}, "policyTypes": ["Ingress"]})),
    Case("namespace-default-deny", "a chart's namespace (createNamespace) without any policy", lambda: _hand_made_one(
        resource("kubernetes:helm.sh/v3:Release", "keda", {"namespace": "keda", "createNamespace": True}))),
    Case("rds-managed-password", "master password as an input",
         _mutate(RDS, None, lambda i: (i.pop("manageMasterUserPassword"), i.update(password="[secret]")))),
    Case("rds-managed-password", "managed password off",
         _mutate(RDS, None, _set(("manageMasterUserPassword",), False))),
    Case("rds-require-tls", "parameter group without require_secure_transport",
         _mutate("aws:rds/parameterGroup:ParameterGroup", None, lambda i: i.update(parameters=[
             p for p in i["parameters"] if p["name"] != "require_secure_transport"]))),
    Case("rds-require-tls", "require_secure_transport OFF",
         _mutate("aws:rds/parameterGroup:ParameterGroup", None, lambda i: [
             p.update(value="OFF") for p in i["parameters"] if p["name"] == "require_secure_transport"])),
    Case("s3-endpoint-scoped", "S3 gateway endpoint without a policy",
         _mutate("aws:ec2/vpcEndpoint:VpcEndpoint", "network-s3", _drop("policy"))),
    Case("s3-endpoint-scoped", "S3 gateway endpoint allowing s3:GetObject on *",
         _mutate("aws:ec2/vpcEndpoint:VpcEndpoint", "network-s3", _set(("policy",), json.dumps({"Statement": [
             {"Sid": "All", "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "*"}]})))),
    Case("vpc-flow-log", "VPC without a flow log", _vpc_without_flow_log),
    Case("namespace-pod-security", "Namespace without an enforce label",
         _mutate("kubernetes:core/v1:Namespace", "namespace-keda",
                 lambda i: i["metadata"]["labels"].pop("pod-security.kubernetes.io/enforce"))),
    Case("namespace-pod-security", "Namespace enforcing a level that does not exist",
         _mutate("kubernetes:core/v1:Namespace", "namespace-keda",
                 lambda i: i["metadata"]["labels"].update({"pod-security.kubernetes.io/enforce": "none"}))),
    # The pack's defaults list no privileged namespace: the shipped slurm namespace fails without its stack's config.
    Case("namespace-pod-security", "privileged namespace the pack config does not list",
         lambda: (prod(), one(prod(), "kubernetes:core/v1:Namespace", "slurm-namespace").urn)),
)
