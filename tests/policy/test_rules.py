"""The rules offline: the shipped stacks pass, every rule fails on a plan that breaks it, and near misses pass."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from policy.model import UNKNOWN, Enforcement, ResourceRule
from policy.pack_config import for_stack
from policy.rules import (
    EBS_ENCRYPTED,
    EKS_API_NOT_WORLD,
    EKS_PRIVATE_ENDPOINT,
    EKS_SECRETS_ENCRYPTION,
    IMDSV2_REQUIRED,
    LOGIN_SET,
    NO_WORLD_SSH,
    NODE_POOL_KEEPS_BUSY_NODES,
    SERVICE,
)
from policy.ruleset import RULES, evaluate
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import one, shipped_plan
from tests.policy.broken import (
    CASES,
    EKS,
    INGRESS,
    LT,
    NODE_CLASS,
    NODE_POOL,
    Case,
    _mutate,
    _open_login,
    resource,
)

pytestmark = pytest.mark.slow  # a plan variant per broken case: `make test-fast` leaves it out


def flagged(plan: Plan) -> set[tuple[str, str]]:
    return {(v.rule, v.urn) for v in evaluate(plan.resources)}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_have_no_violations(stack: str) -> None:
    violations = evaluate(shipped_plan(stack).resources, for_stack(stack, RULES))
    assert [(v.rule, v.urn, v.message) for v in violations] == []


def test_privileged_namespaces_need_a_reason_from_the_pack_owners() -> None:
    plan = copy.deepcopy(shipped_plan("prod"))
    listed = for_stack("prod", RULES)
    keda = one(plan, "kubernetes:core/v1:Namespace", "namespace-keda")
    keda.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "privileged"
    found = {v.urn for v in evaluate(plan.resources, listed) if v.rule == "namespace-pod-security"}
    assert found == {keda.urn}  # slurm and monitoring are listed, keda is not


def test_every_rule_has_a_breaking_plan() -> None:
    assert {c.rule for c in CASES} == {r.name for r in RULES}


def test_rule_names_are_unique_and_documented() -> None:
    assert len({r.name for r in RULES}) == len(RULES)
    assert all(r.description and r.fix for r in RULES)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_breaking_plan_is_flagged(case: Case) -> None:
    plan, urn = case.make()
    assert (case.rule, urn) in flagged(plan)


def _consolidation_held_by_budget(inputs: dict) -> None:
    disruption = inputs["spec"]["disruption"]
    disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
    disruption["budgets"].append({"nodes": "0", "reasons": ["Underutilized"]})


def _cidr_rule_on_the_nodes_group(inputs: dict) -> None:
    inputs.pop("referencedSecurityGroupId")
    inputs["cidrIpv4"] = "10.0.0.0/16"


# Settings close to a violation that the rules must accept.
NEAR_MISSES: list[tuple[str, str, Callable[[], tuple[Plan, str]]]] = [
    ("imdsv2-required", "EC2NodeClass without metadataOptions (Karpenter defaults to required)",
     _mutate(NODE_CLASS, "partition-gpu-h100-nodeclass", lambda i: i["spec"].pop("metadataOptions"))),
    ("no-world-ssh", "login NLB open to the listed office range, internet-facing",
     _mutate("kubernetes:slinky.slurm.net/v1beta1:LoginSet", None, lambda i: _open_login(i, ["203.0.113.0/24"]))),
    ("eks-api-not-world", "public endpoint limited to office ranges",
     _mutate(EKS, None, lambda i: i.update(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"]))),
    ("eks-secrets-encryption", "KMS key ARN not known until deploy",
     _mutate(EKS, None, lambda i: i.update(encryptionConfigKeyArn=UNKNOWN))),
    ("nodepool-keeps-busy-nodes", "WhenEmptyOrUnderutilized held back by a 0-node Underutilized budget",
     _mutate(NODE_POOL, "partition-gpu-a100-nodepool", _consolidation_held_by_budget)),
    # The Lustre client rule on the nodes' group: with a CIDR it references no FSx group, so it guards nothing.
    ("storage-cluster-only", "CIDR rule on the cluster's own group",
     _mutate(INGRESS, "storage-nodes-from-fsx-988", _cidr_rule_on_the_nodes_group)),
    ("slurm-patched", "NodeSet slurmd on 25.11.8, the first release with the fix",
     _mutate("kubernetes:slinky.slurm.net/v1beta1:NodeSet", "slurm-nodeset-gpu-h100",
             lambda i: i["spec"]["slurmd"].update(image="ghcr.io/slinkyproject/slurmd-pyxis:25.11.8-ubuntu24.04"))),
    ("images-pinned", "NodeSet slurmd by digest",
     _mutate("kubernetes:slinky.slurm.net/v1beta1:NodeSet", "slurm-nodeset-gpu-h100",
             lambda i: i["spec"]["slurmd"].update(image=f"ghcr.io/slinkyproject/slurmd-pyxis@sha256:{'0' * 64}"))),
]


@pytest.mark.parametrize(("rule", "what", "make"), NEAR_MISSES, ids=[f"{r}: {w}" for r, w, _ in NEAR_MISSES])
def test_near_miss_is_accepted(rule: str, what: str, make: Callable[[], tuple[Plan, str]]) -> None:
    plan, urn = make()
    if rule == "storage-cluster-only":  # as the plan would record it: no dependency on the FSx group any more
        target = plan.by_urn()[urn]
        target.dependencies = [d for d in target.dependencies if d.endswith("::eks")]
    assert (rule, urn) not in flagged(plan)


def test_only_s3_encryption_is_advisory() -> None:
    assert [r.name for r in RULES if r.enforcement is Enforcement.advisory] == ["s3-encrypted"]


# --- single resources, judged by their rule exactly as the engine does ---------------------------------------

def findings(rule: ResourceRule, type_: str, inputs: dict[str, Any]) -> list[str]:
    return [v.message for v in rule.evaluate(resource(type_, "r", inputs))]


SCRATCH_CLASS = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "shared"},
                 "volumeBindingMode": "Immediate"}


def test_a_node_class_allowing_imdsv1_is_flagged_at_its_spec_path() -> None:
    inputs = {"metadata": {"name": "gpu-a100"}, "spec": {"role": "karpenter-node", "metadataOptions": {
        "httpEndpoint": "enabled", "httpPutResponseHopLimit": 1, "httpTokens": "optional"}}}
    assert findings(IMDSV2_REQUIRED, NODE_CLASS, inputs) == [
        "spec.metadataOptions.httpTokens is optional: IMDSv1 lets any process on the node (a pod included, "
        "through SSRF) read the node role's credentials without a token"]


def test_a_launch_template_allowing_imdsv1_is_flagged_at_its_top_level_path() -> None:
    inputs = {"metadataOptions": {"httpEndpoint": "disabled", "httpTokens": "optional"}}
    assert findings(IMDSV2_REQUIRED, LT, inputs) == [
        "metadataOptions.httpEndpoint is disabled: the node cannot bootstrap (nodeadm reads IMDS)",
        "metadataOptions.httpTokens is optional: IMDSv1 lets any process on the node (a pod included, "
        "through SSRF) read the node role's credentials without a token"]


@pytest.mark.parametrize("provisioner", [
    "efs.csi.aws.com",  # EFS: encrypted by the file system, no `encrypted` parameter
    "fsx.csi.aws.com",
    "csi.trident.netapp.io",  # FSx for NetApp ONTAP through Trident
])
def test_only_ebs_storage_classes_need_the_encrypted_parameter(provisioner: str) -> None:
    inputs = {**SCRATCH_CLASS, "provisioner": provisioner, "parameters": {"fileSystemId": "fs-0123456789abcdef0"}}
    assert findings(EBS_ENCRYPTED, "kubernetes:storage.k8s.io/v1:StorageClass", inputs) == []


def test_an_ebs_storage_class_without_encryption_is_flagged() -> None:
    inputs = {**SCRATCH_CLASS, "provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3"}}
    assert findings(EBS_ENCRYPTED, "kubernetes:storage.k8s.io/v1:StorageClass", inputs) == [
        "parameters.encrypted is not \"true\": volumes of this ebs.csi.aws.com StorageClass are unencrypted "
        "unless the account encrypts EBS by default"]


def _ingress_rule(port: int, cidr: str) -> dict[str, Any]:
    return {"securityGroupId": "sg-0123456789abcdef0", "ipProtocol": "tcp", "fromPort": port, "toPort": port,
            "cidrIpv4": cidr}


def test_ssh_from_inside_the_vpc_is_not_world_ssh() -> None:
    assert findings(NO_WORLD_SSH, INGRESS, _ingress_rule(22, "10.0.0.0/16")) == []


def test_https_from_the_internet_is_not_world_ssh() -> None:
    assert findings(NO_WORLD_SSH, INGRESS, _ingress_rule(443, "0.0.0.0/0")) == []


def test_ssh_from_the_internet_on_a_security_group_rule_is_flagged() -> None:
    assert findings(NO_WORLD_SSH, INGRESS, _ingress_rule(22, "0.0.0.0/0")) == [
        "ingress from 0.0.0.0/0 reaches port 22 (tcp 22-22)"]


def _login_set(service: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "slurm-login"}, "spec": {"replicas": 1, "service": service}}


INTERNAL_NLB = {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
                "service.beta.kubernetes.io/aws-load-balancer-internal": "true"}


def test_an_internal_login_load_balancer_without_source_ranges_is_accepted() -> None:
    service = {"metadata": {"annotations": INTERNAL_NLB}, "spec": {"type": "LoadBalancer"}, "port": 22}
    assert findings(NO_WORLD_SSH, LOGIN_SET, _login_set(service)) == []


def test_an_internet_facing_login_load_balancer_without_source_ranges_is_flagged() -> None:
    annotations = {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}
    service = {"metadata": {"annotations": annotations}, "spec": {"type": "LoadBalancer"}, "port": 22}
    assert findings(NO_WORLD_SSH, LOGIN_SET, _login_set(service)) == [
        "spec.service: an internet-facing LoadBalancer with no loadBalancerSourceRanges accepts SSH from anywhere"]


def test_login_source_ranges_unknown_until_deploy_are_not_reported() -> None:
    annotations = {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}
    service = {"metadata": {"annotations": annotations},
               "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": UNKNOWN}, "port": 22}
    assert findings(NO_WORLD_SSH, LOGIN_SET, _login_set(service)) == []


def _ssh_service(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "slurm-login-ssh", "namespace": "slurm"},
            "spec": {"selector": {"app.kubernetes.io/name": "login"},
                     "ports": [{"name": "ssh", "port": 22, "targetPort": 22, "protocol": "TCP"}], **spec}}


@pytest.mark.parametrize("spec", [{}, {"type": "ClusterIP"}, {"type": "NodePort"}], ids=str)
def test_an_ssh_service_without_a_load_balancer_is_not_world_ssh(spec: dict[str, Any]) -> None:
    assert findings(NO_WORLD_SSH, SERVICE, _ssh_service(**spec)) == []


def test_an_ssh_service_load_balancer_open_to_the_internet_is_flagged() -> None:
    inputs = _ssh_service(type="LoadBalancer", loadBalancerSourceRanges=["203.0.113.0/24", "::/0"])
    assert findings(NO_WORLD_SSH, SERVICE, inputs) == ["loadBalancerSourceRanges include ::/0"]


# aws.eks.Cluster, the child of pulumi-eks's component that `pulumi preview` sees: its settings sit under
# vpcConfig and encryptionConfig, not at the top level.
EKS_CLUSTER = "aws:eks/cluster:Cluster"
KEY_ARN = "arn:aws:kms:us-west-2:123456789012:key/751b95f0-33a3-da0c-538e-9b6c984099fe"


def _aws_eks_cluster(**vpc_config: Any) -> dict[str, Any]:
    return {"name": "ml-training-prod", "version": "1.33", "roleArn": "arn:aws:iam::123456789012:role/eks-cluster",
            "vpcConfig": {"subnetIds": ["subnet-049726d8e7833b7aad", "subnet-074c3c2e1d8a59a291"], **vpc_config},
            "encryptionConfig": {"provider": {"keyArn": KEY_ARN}, "resources": ["secrets"]}}


def test_a_private_aws_eks_cluster_passes_every_eks_rule() -> None:
    inputs = _aws_eks_cluster(endpointPublicAccess=False, endpointPrivateAccess=True)
    assert [v.message for r in (EKS_API_NOT_WORLD, EKS_PRIVATE_ENDPOINT, EKS_SECRETS_ENCRYPTION)
            for v in r.evaluate(resource(EKS_CLUSTER, "cluster", inputs))] == []


def test_an_aws_eks_cluster_open_to_the_world_is_flagged_from_its_vpc_config() -> None:
    inputs = _aws_eks_cluster(endpointPublicAccess=True, endpointPrivateAccess=False,
                              publicAccessCidrs=["0.0.0.0/0"])
    assert findings(EKS_API_NOT_WORLD, EKS_CLUSTER, inputs) == ["the public API endpoint accepts 0.0.0.0/0"]
    assert findings(EKS_PRIVATE_ENDPOINT, EKS_CLUSTER, inputs) == [
        "endpointPrivateAccess is not true: nodes and pods reach the API server through its public endpoint"]


def test_an_aws_eks_cluster_whose_key_encrypts_no_secrets_is_flagged() -> None:
    inputs = _aws_eks_cluster(endpointPublicAccess=False, endpointPrivateAccess=True)
    inputs["encryptionConfig"]["resources"] = []
    assert findings(EKS_SECRETS_ENCRYPTION, EKS_CLUSTER, inputs) == [
        "no KMS key encrypts Kubernetes Secrets: they sit in etcd with only EKS's default encryption, "
        "and this cannot be added to the cluster without an update that re-encrypts every Secret"]


def _node_pool(consolidation_policy: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu-a100"},
            "spec": {"template": {"spec": {"expireAfter": "Never"}},
                     "disruption": {"consolidationPolicy": consolidation_policy, "consolidateAfter": "10m",
                                    "budgets": [{"nodes": "20%"}]}}}


def test_a_node_pool_that_consolidates_only_empty_nodes_passes() -> None:
    assert findings(NODE_POOL_KEEPS_BUSY_NODES, NODE_POOL, _node_pool("WhenEmpty")) == []


@pytest.mark.parametrize("policy", ["WhenEmptyOrUnderutilized", "WhenUnderutilized", "Never"])
def test_any_consolidation_policy_but_when_empty_is_flagged(policy: str) -> None:
    """WhenEmpty is the only policy accepted: WhenUnderutilized (v1beta1) and `Never` (by analogy with
    expireAfter) are not v1 values, and the rule does not guess what Karpenter makes of them."""
    assert findings(NODE_POOL_KEEPS_BUSY_NODES, NODE_POOL, _node_pool(policy)) == [
        f"disruption.consolidationPolicy is {policy}: Karpenter may drain a node that runs a job "
        "to pack its pods onto fewer nodes"]

