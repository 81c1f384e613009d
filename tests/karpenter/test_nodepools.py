"""Partition -> EC2NodeClass + NodePool, field by field, and valid against Karpenter 1.14.1's CRDs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from components.compute.nodepools import node_pool_spec
from components.config.validation import parse_cluster_config
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan
from tests.config.helpers import raw_config
from tests.plan.fixtures import shipped_plan

REPO = Path(__file__).resolve().parents[2]


def _manifest(plan: Plan, kind: str, name: str) -> dict:
    (doc,) = [m for m in plan.manifests() if m["kind"] == kind and m["metadata"]["name"] == name]
    return doc


@pytest.fixture(scope="module")
def karpenter_schemas(crd_registry: SchemaRegistry) -> SchemaRegistry:
    return crd_registry


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_nodepool_and_nodeclass_validates(stack: str, karpenter_schemas: SchemaRegistry) -> None:
    plan = shipped_plan(stack)
    docs = [m for m in plan.manifests() if m["kind"] in ("NodePool", "EC2NodeClass")]
    raw = raw_config(stack)
    assert len(docs) == 2 * (len(raw["partitions"]) + len(raw.get("kubernetesPools", {})))
    for doc in docs:
        assert validate_manifest(doc, karpenter_schemas) == [], doc["metadata"]["name"]


def test_validation_catches_a_broken_nodepool(karpenter_schemas: SchemaRegistry) -> None:
    doc = _manifest(shipped_plan("prod"), "NodePool", "gpu-h100")
    broken = {**doc, "spec": {**doc["spec"], "template": {**doc["spec"]["template"], "spec": {
        **doc["spec"]["template"]["spec"], "expireAfter": "forever"}}}}
    assert any("expireAfter" in p.path for p in validate_manifest(broken, karpenter_schemas))


def test_h100_partition_nodepool_field_by_field() -> None:
    spec = _manifest(shipped_plan("prod"), "NodePool", "gpu-h100")["spec"]
    template = spec["template"]
    assert template["metadata"]["labels"] == {"node.slurm-eks.io/partition": "gpu-h100",
                                              "node.slurm-eks.io/accelerator": "nvidia",
                                              "nvidia.com/gpu.present": "true"}
    assert template["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert template["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                "name": "gpu-h100"}
    assert template["spec"]["expireAfter"] == "Never"
    requirements = {r["key"]: r["values"] for r in template["spec"]["requirements"]}
    assert requirements == {"node.kubernetes.io/instance-type": ["p5.48xlarge"],
                            "karpenter.sh/capacity-type": ["on-demand"], "kubernetes.io/arch": ["amd64"],
                            "topology.kubernetes.io/zone": ["us-west-2a"]}
    # maxNodes 8 x (192 vCPU, 2048 GiB, 8 GPUs)
    assert spec["limits"] == {"cpu": "1536", "memory": "16384Gi", "nvidia.com/gpu": "64"}
    assert spec["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m",
                                  # Drift blocked from Sunday 07:00 UTC for 164 h: only the 03:00-07:00 window.
                                  "budgets": [{"nodes": "0", "reasons": ["Drifted"], "schedule": "0 7 * * 0",
                                               "duration": "164h"}, {"nodes": "20%"}]}


def test_h100_nodeclass_is_imdsv2_encrypted_efa_placed() -> None:
    plan = shipped_plan("prod")
    spec = _manifest(plan, "EC2NodeClass", "gpu-h100")["spec"]
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20260714"}]
    assert spec["role"] == "karpenter-node"
    assert spec["subnetSelectorTerms"] == spec["securityGroupSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "ml-training-prod"}}]
    # The endpoint stays on (nodeadm bootstraps from IMDS), tokens only, one hop (pods cannot reach it).
    assert spec["metadataOptions"] == {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                       "httpPutResponseHopLimit": 1, "httpTokens": "required"}
    (root,) = spec["blockDeviceMappings"]
    assert root["rootVolume"] is True and root["ebs"]["encrypted"] is True and root["ebs"]["volumeType"] == "gp3"
    assert root["ebs"]["deleteOnTermination"] is True  # no orphaned 200 GiB volume per node ever launched
    assert spec["instanceStorePolicy"] == "RAID0"
    assert spec["placementGroupSelector"] == {"name": "ml-training-prod-gpu-h100"}
    groups = {g.inputs["name"]: g.inputs for g in plan.of_type("aws:ec2/placementGroup:PlacementGroup")}
    assert groups["ml-training-prod-gpu-h100"]["strategy"] == "cluster"


def test_trainium_partition_uses_neuron_labels_taints_and_limits() -> None:
    spec = _manifest(shipped_plan("prod"), "NodePool", "trainium")["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert labels["node.slurm-eks.io/accelerator"] == "neuron" and labels["aws.amazon.com/neuron.present"] == "true"
    assert "nvidia.com/gpu.present" not in labels
    assert spec["template"]["spec"]["taints"] == [{"key": "aws.amazon.com/neuron", "value": "true",
                                                   "effect": "NoSchedule"}]
    requirements = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert requirements["node.kubernetes.io/instance-type"] == ["trn1.32xlarge", "trn1n.32xlarge"]
    # maxNodes 32 x (128 vCPU, 512 GiB, 16 Neuron devices)
    assert spec["limits"] == {"cpu": "4096", "memory": "16384Gi", "aws.amazon.com/neuron": "512"}


def test_partition_without_efa_gets_no_efa_settings() -> None:
    plan = shipped_plan("dev")
    pool = _manifest(plan, "NodePool", "gpu")["spec"]
    keys = [r["key"] for r in pool["template"]["spec"]["requirements"]]
    assert "topology.kubernetes.io/zone" not in keys
    assert {r["key"]: r["values"] for r in pool["template"]["spec"]["requirements"]}[
        "karpenter.sh/capacity-type"] == ["spot"]
    node_class = _manifest(plan, "EC2NodeClass", "gpu")["spec"]
    assert "placementGroupSelector" not in node_class and "capacityReservationSelectorTerms" not in node_class
    assert not plan.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert "vpc.amazonaws.com/efa" not in plan.to_json()


def test_reserved_partition_selects_its_reservations_without_a_placement_group(tmp_path: Path) -> None:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="reserved", capacityReservationIds=["cr-0123456789abcdef0"])
    (tmp_path / "Pulumi.r.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    plan, _ = run_plan("r", tmp_path)
    node_class = _manifest(plan, "EC2NodeClass", "gpu-h100")["spec"]
    assert node_class["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"}]
    assert "placementGroupSelector" not in node_class
    pool = _manifest(plan, "NodePool", "gpu-h100")["spec"]
    assert {r["key"]: r["values"] for r in pool["template"]["spec"]["requirements"]}[
        "karpenter.sh/capacity-type"] == ["reserved"]


def test_capacity_block_partition_is_reserved_capacity_of_type_capacity_block(
        tmp_path: Path, karpenter_schemas: SchemaRegistry) -> None:
    """Karpenter v1.14.1 selects blocks like ODCRs (capacityReservationSelectorTerms), gives their nodes capacity
    type `reserved`, and labels them karpenter.k8s.aws/capacity-reservation-type=capacity-block (website/content/
    en/docs/tasks/odcrs.md)."""
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="capacity-block",
                                         capacityReservationIds=["cr-0123456789abcdef0", "cr-0fedcba9876543210"])
    (tmp_path / "Pulumi.cb.yaml").write_text(yaml.safe_dump({"config": {"slurm-eks:cluster": raw}}))
    plan, _ = run_plan("cb", tmp_path)
    node_class = _manifest(plan, "EC2NodeClass", "gpu-h100")
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": "cr-0123456789abcdef0"},
                                                                      {"id": "cr-0fedcba9876543210"}]
    assert "placementGroupSelector" not in node_class["spec"]
    assert not [g for g in plan.of_type("aws:ec2/placementGroup:PlacementGroup") if "gpu-h100" in g.urn]
    pool = _manifest(plan, "NodePool", "gpu-h100")
    requirements = {r["key"]: (r["operator"], r["values"]) for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ("In", ["reserved"])
    assert requirements["karpenter.k8s.aws/capacity-reservation-type"] == ("In", ["capacity-block"])
    assert requirements["topology.kubernetes.io/zone"] == ("In", ["us-west-2a"])  # the EFA zone
    for doc in (node_class, pool):
        assert validate_manifest(doc, karpenter_schemas) == [], doc["kind"]


@pytest.mark.parametrize(("capacity_type", "reservation_types"), [("reserved", None),
                                                                ("capacity-block", ["capacity-block"])])
def test_only_a_capacity_block_partition_narrows_the_reservation_type(capacity_type: str,
                                                                     reservation_types: list[str] | None) -> None:
    """`reserved` keeps today's NodePool: any reservation its selector terms name, of either type."""
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType=capacity_type, capacityReservationIds=["cr-0123456789abcdef0"])
    config = parse_cluster_config(raw)[0]
    spec = node_pool_spec("gpu-h100", config.partitions["gpu-h100"], config)
    requirements = {r["key"]: r["values"] for r in spec["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["reserved"]
    assert requirements.get("karpenter.k8s.aws/capacity-reservation-type") == reservation_types


def test_the_root_volume_is_the_one_docs_nodes_md_describes() -> None:
    """docs/nodes.md states size, IOPS and throughput; a change to either side must change the other."""
    size, iops, throughput = re.search(r"(\d+) GiB gp3 root volume at (\d+) IOPS and (\d+) MiB/s",
                                       (REPO / "docs" / "nodes.md").read_text()).groups()
    (root,) = _manifest(shipped_plan("prod"), "EC2NodeClass", "gpu-h100")["spec"]["blockDeviceMappings"]
    assert (root["ebs"]["volumeSize"], root["ebs"]["iops"], root["ebs"]["throughput"]) == (
        f"{size}Gi", int(iops), int(throughput))


def test_nodeclass_tags_every_instance_with_the_stack_tags() -> None:
    """`tags` reach every AWS resource (docs/config.md): Karpenter's instances and volumes too."""
    spec = _manifest(shipped_plan("prod"), "EC2NodeClass", "gpu-a100")["spec"]
    assert spec["tags"] == {"slurm-eks:partition": "gpu-a100", "team": "ml-platform", "environment": "prod"}
