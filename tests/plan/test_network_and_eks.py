"""The network and EKS pieces of the plan carry the inputs a secure, working cluster needs."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scripts.offline.plan import run_plan
from scripts.offline.plan_model import UNKNOWN
from tests.config.helpers import raw_config
from tests.plan.fixtures import one, shipped_plan

SUBNET = "aws:ec2/subnet:Subnet"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_private_subnets_are_tagged_for_discovery_and_internal_lbs(stack: str) -> None:
    plan = shipped_plan(stack)
    cluster = plan.outputs["clusterName"]
    config = raw_config(stack)
    private = [r for r in plan.of_type(SUBNET) if "-private-" in r.name]
    public = [r for r in plan.of_type(SUBNET) if "-public-" in r.name]
    assert sorted(r.inputs["availabilityZone"] for r in private) == sorted(config["network"]["availabilityZones"])
    for r in private:
        assert r.inputs["tags"]["karpenter.sh/discovery"] == cluster
        assert r.inputs["tags"]["kubernetes.io/role/internal-elb"] == "1"
    for r in public:
        assert "karpenter.sh/discovery" not in r.inputs["tags"]
        assert r.inputs["mapPublicIpOnLaunch"] is False
    vpc = ipaddress.ip_network(one(plan, "aws:ec2/vpc:Vpc").inputs["cidrBlock"])
    blocks = [ipaddress.ip_network(r.inputs["cidrBlock"]) for r in private + public]
    assert all(b.subnet_of(vpc) for b in blocks)
    assert not any(a.overlaps(b) for i, a in enumerate(blocks) for b in blocks[i + 1:])


def test_one_nat_per_zone_and_private_routes_through_it() -> None:
    plan = shipped_plan("prod")
    nats = {r.urn: r for r in plan.of_type("aws:ec2/natGateway:NatGateway")}
    assert len(nats) == 3
    private_rts = [r for r in plan.of_type("aws:ec2/routeTable:RouteTable") if "-private-" in r.name]
    assert len(private_rts) == 3
    for rt in private_rts:
        (route,) = rt.inputs["routes"]
        assert route["cidrBlock"] == "0.0.0.0/0" and route["natGatewayId"].startswith("nat-")
    s3 = one(plan, "aws:ec2/vpcEndpoint:VpcEndpoint")
    assert s3.inputs["serviceName"] == "com.amazonaws.us-west-2.s3" and len(s3.inputs["routeTableIds"]) == 3


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_eks_cluster_inputs(stack: str) -> None:
    plan = shipped_plan(stack)
    config = raw_config(stack)
    eks = one(plan, "eks:index:Cluster").inputs
    assert eks["authenticationMode"] == "API"
    assert eks["version"] == config["kubernetesVersion"]
    assert eks["endpointPrivateAccess"] is True
    assert eks["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    assert eks["createOidcProvider"] is True and eks["skipDefaultNodeGroup"] is True
    # CoreDNS is our own add-on, created after the system nodes (pulumi/pulumi-eks#1819).
    assert eks["corednsAddonOptions"]["enabled"] is False
    coredns = next(r for r in plan.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "coredns")
    assert json.loads(coredns.inputs["configurationValues"]) == {"nodeSelector": {"node.slurm-eks.io/role": "system"}}
    assert one(plan, "eks:index:ManagedNodeGroup", "eks-system").urn in coredns.dependencies
    assert eks["nodeAssociatePublicIpAddress"] is False
    key = one(plan, "aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    assert eks["encryptionConfigKeyArn"].startswith("arn:aws:kms:us-west-2:") and key.urn in one(
        plan, "eks:index:Cluster").dependencies
    deployer = config["network"].get("deployer") or {}
    public = config["network"].get("apiPublicCidrs", []) + (deployer.get("cidrs", []) if deployer.get("via") == "public"
                                                           else [])
    assert public, "both shipped stacks reach the API through the public endpoint from named ranges"
    assert eks["endpointPublicAccess"] is True
    assert eks.get("publicAccessCidrs") == public


def test_admin_roles_get_cluster_admin_access_entries() -> None:
    entries = one(shipped_plan("prod"), "eks:index:Cluster").inputs["accessEntries"]
    # The admin roles, and the principal `pulumi up` runs as (the mocks' caller): EKS's creator admin is off.
    assert {k: e["principalArn"] for k, e in entries.items()} == {
        "admin-0": "arn:aws:iam::123456789012:role/platform-admins",
        "deployer": "arn:aws:iam::123456789012:user/planner"}
    for entry in entries.values():
        (policy,) = entry["accessPolicies"].values()
        assert policy["policyArn"].endswith("AmazonEKSClusterAdminPolicy")
        assert policy["accessScope"] == {"type": "cluster"}
    assert list(one(shipped_plan("dev"), "eks:index:Cluster").inputs["accessEntries"]) == ["deployer"]


def test_system_node_group_is_imdsv2_encrypted_and_labelled() -> None:
    plan = shipped_plan("prod")
    group = one(plan, "eks:index:ManagedNodeGroup", "eks-system").inputs
    assert group["scalingConfig"] == {"minSize": 2, "desiredSize": 2, "maxSize": 4}
    assert group["labels"] == {"node.slurm-eks.io/role": "system"}
    assert group["instanceTypes"] == ["m7i.2xlarge"]
    assert sorted(group["subnetIds"]) == sorted(plan.outputs["privateSubnetIds"])
    lt = one(plan, "aws:ec2/launchTemplate:LaunchTemplate", "eks-system").inputs
    assert lt["metadataOptions"]["httpTokens"] == "required"
    assert lt["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (disk,) = lt["blockDeviceMappings"]
    assert disk["ebs"]["encrypted"] == "true" and disk["ebs"]["volumeType"] == "gp3"


def unknown_paths(plan: Any) -> list[tuple[str, str]]:
    """(resource name, input path) of every value the offline plan shows as unknown."""
    def walk(value: Any, path: str) -> Iterator[str]:
        if value == UNKNOWN:
            yield path
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from walk(item, f"{path}.{key}" if path else key)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, f"{path}[{i}]")
    return [(r.name, path) for r in plan.resources for path in walk(r.inputs, "")]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_resource_sits_in_a_component_and_nothing_stays_unknown(stack: str) -> None:
    plan = shipped_plan(stack)
    stack_urn = f"urn:pulumi:{stack}::slurm-eks::pulumi:pulumi:Stack::slurm-eks-{stack}"
    top = {r.type for r in plan.resources if r.parent == stack_urn}
    assert all(t.startswith("slurm-eks:index:") for t in top - {"pulumi:providers:aws"}), top
    assert {"slurm-eks:index:Network", "slurm-eks:index:EksCluster", "slurm-eks:index:Karpenter",
            "slurm-eks:index:PartitionNodes", "slurm-eks:index:SharedStorage", "slurm-eks:index:SlurmCluster"} <= top
    # Unknown offline, and only that: the agent image's digest, which only its build in `pulumi up` knows
    # (components/slinky/agent_image.py), in the agent pods' image fields.
    assert sorted(unknown_paths(plan)) == [
        ("repair-deployment", "spec.template.spec.containers[0].image"),
        ("repair-deployment", "spec.template.spec.initContainers[0].image"),
        ("slurm-accounts-reconcile", "spec.template.spec.containers[0].image")]
    aws = [r for r in plan.resources if r.type.startswith("aws:")]
    assert all(r.provider and r.provider.endswith("pulumi:providers:aws::aws") for r in aws)


def test_default_tags_name_cluster_and_stack() -> None:
    provider = one(shipped_plan("prod"), "pulumi:providers:aws")
    assert provider.inputs["region"] == "us-west-2"
    assert provider.inputs["defaultTags"] == {"tags": {"environment": "prod", "slurm-eks:cluster": "ml-training-prod",
                                                       "slurm-eks:stack": "prod", "team": "ml-platform"}}


def test_existing_vpc_is_tagged_not_created(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["network"] = {"vpcId": "vpc-0123456789abcdef0", "efaAvailabilityZone": "us-west-2a",
                      "privateSubnetIds": ["subnet-0aaa", "subnet-0bbb", "subnet-0ccc"],
                      "deployer": raw["network"]["deployer"]}
    (tmp_path / "Pulumi.byo.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    plan, _ = run_plan("byo", tmp_path)
    assert not plan.of_type("aws:ec2/vpc:Vpc") and not plan.of_type(SUBNET)
    tags = [t for t in plan.of_type("aws:ec2/tag:Tag") if t.inputs["resourceId"].startswith("subnet-")]
    assert sorted(t.inputs["resourceId"] for t in tags) == ["subnet-0aaa", "subnet-0bbb", "subnet-0ccc"]
    assert {(t.inputs["key"], t.inputs["value"]) for t in tags} == {("karpenter.sh/discovery", "ml-training-prod")}
    assert one(plan, "eks:index:Cluster").inputs["vpcId"] == "vpc-0123456789abcdef0"
