"""FSx for Lustre in the plan: where it lives, who may reach it, its S3 links, and the PV/PVC pods mount."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from components.config import cluster as cfg
from components.names import SHARED_PVC, SLURM_NAMESPACE, claim_volume_name
from components.storage.fsx import CSI_CONTROLLER_SA, repository_s3_config
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from scripts.offline.mocks import RealisticMocks, cluster_security_group_id
from scripts.offline.plan_model import Plan, PlannedResource
from tests.config.helpers import raw_config
from tests.plan.fixtures import one, shipped_plan

LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
PV, PVC = "kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:PersistentVolumeClaim"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _private_subnet_id(plan: Plan, zone: str) -> str:
    # The planned subnet's ID is what its route table association points at.
    return one(plan, "aws:ec2/routeTableAssociation:RouteTableAssociation", f"network-private-{zone}").inputs[
        "subnetId"]


def _computed(plan: Plan, resource: PlannedResource) -> dict[str, Any]:
    """What the (mocked) cloud returns for a resource: its ID and computed outputs."""
    mocks = RealisticMocks(region=raw_config(plan.stack)["region"], cluster_name=plan.outputs["clusterName"])
    rid, state = mocks.new_resource(pulumi.runtime.MockResourceArgs(
        typ=resource.type, name=resource.name, inputs=resource.inputs, provider="", resource_id="", custom=True))
    return {"id": rid, **state}


@pytest.mark.parametrize("stack, zone", [("prod", "us-west-2a"), ("dev", "us-west-2a")])
def test_file_system_sits_in_one_private_subnet_of_the_efa_zone(stack: str, zone: str) -> None:
    # prod names its EFA zone; dev has none, so the first zone.
    plan = shipped_plan(stack)
    subnet = one(plan, LUSTRE).inputs["subnetIds"]
    assert isinstance(subnet, str) and subnet == _private_subnet_id(plan, zone)


def test_persistent_file_system_inputs_follow_the_config() -> None:
    fsx = raw_config("prod")["storage"]["fsx"]
    fs = one(shipped_plan("prod"), LUSTRE)
    assert fs.inputs["deploymentType"] == "PERSISTENT_2" == fsx["deploymentType"]
    assert fs.inputs["storageCapacity"] == fsx["capacityGiB"] == 4800
    assert fs.inputs["perUnitStorageThroughput"] == fsx["throughputPerTiB"] == 250
    assert fs.inputs["metadataConfiguration"] == {"mode": "AUTOMATIC"}
    assert fs.inputs["fileSystemTypeVersion"] == "2.15"
    assert fs.inputs["dataCompressionType"] == "LZ4" and fs.inputs["copyTagsToBackups"] is True
    assert fs.protect is True


def test_scratch_file_system_for_dev_has_no_persistent_settings_and_is_protected_all_the_same() -> None:
    fs = one(shipped_plan("dev"), LUSTRE)
    assert fs.inputs["deploymentType"] == "SCRATCH_2" and fs.inputs["storageCapacity"] == 1200
    for key in ("perUnitStorageThroughput", "metadataConfiguration", "copyTagsToBackups"):
        assert key not in fs.inputs
    assert fs.inputs["dataCompressionType"] == "LZ4"
    # Homes live on it in dev too: no config change (SCRATCH_2 from PERSISTENT_2, a new subnet) can delete it in one
    # `pulumi up`, and `pulumi destroy` leaves it (docs/operating.md "Shared file system").
    assert fs.protect is True and fs.retain_on_delete is True


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_lustre_ports_are_open_only_between_the_nodes_and_the_file_servers(stack: str) -> None:
    plan = shipped_plan(stack)
    (fsx_sg,) = one(plan, LUSTRE).inputs["securityGroupIds"]
    nodes = cluster_security_group_id(plan.outputs["clusterName"])
    # Only rules about the file system: other components (e.g. the accounting database) add their own.
    rules = [r for r in plan.of_type(INGRESS) if fsx_sg in (r.inputs["securityGroupId"],
                                                           r.inputs.get("referencedSecurityGroupId"))]
    lustre = {(988, 988), (1018, 1023)}
    on_fsx = {(r.inputs["fromPort"], r.inputs["toPort"], r.inputs["referencedSecurityGroupId"])
              for r in rules if r.inputs["securityGroupId"] == fsx_sg}
    assert on_fsx == {(low, high, peer) for low, high in lustre for peer in (nodes, fsx_sg)}
    on_nodes = {(r.inputs["fromPort"], r.inputs["toPort"], r.inputs["referencedSecurityGroupId"])
                for r in rules if r.inputs["securityGroupId"] == nodes}
    assert on_nodes == {(low, high, fsx_sg) for low, high in lustre}
    for rule in rules:
        assert rule.inputs["ipProtocol"] == "tcp"
        assert not {"cidrIpv4", "cidrIpv6", "prefixListId"} & set(rule.inputs), rule.name
    assert [r.inputs["ipProtocol"] for r in plan.of_type(EGRESS) if r.inputs["securityGroupId"] == fsx_sg] == ["-1"]
    sg = one(plan, "aws:ec2/securityGroup:SecurityGroup", "storage-fsx")
    assert sg.inputs["vpcId"] == plan.outputs["vpcId"] and "ingress" not in sg.inputs


def test_each_repository_gets_one_association_with_exactly_its_events() -> None:
    plan = shipped_plan("prod")
    fs_id = plan.outputs["fsxFileSystemId"]
    want = {repo["path"]: repo for repo in raw_config("prod")["storage"]["fsx"]["repositories"]}
    got = {d.inputs["fileSystemPath"]: d.inputs for d in plan.of_type(DRA)}
    assert sorted(got) == sorted(want) == ["/checkpoints", "/data"]
    for path, dra in got.items():
        repo = want[path]
        assert dra["fileSystemId"] == fs_id and dra["dataRepositoryPath"] == repo["s3"]
        assert dra["s3"].get("autoImportPolicy", {}).get("events", []) == repo.get("import", [])
        assert dra["s3"].get("autoExportPolicy", {}).get("events", []) == repo.get("export", [])
        assert dra["batchImportMetaDataOnCreate"] is bool(repo.get("import"))
    assert not shipped_plan("dev").of_type(DRA)


def test_s3_block_holds_only_the_directions_configured() -> None:
    both = cfg.Repository(path="/x", s3="s3://b/x", import_events=["NEW"], export_events=["NEW", "DELETED"])
    assert repository_s3_config(both) == {"auto_import_policy": {"events": ["NEW"]},
                                          "auto_export_policy": {"events": ["NEW", "DELETED"]}}
    assert repository_s3_config(cfg.Repository(path="/y", s3="s3://b/y")) == {}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_volume_and_claim_point_at_the_file_system_and_bind_to_each_other(stack: str) -> None:
    plan = shipped_plan(stack)
    fs = one(plan, LUSTRE)
    cloud = _computed(plan, fs)
    assert cloud["id"] == plan.outputs["fsxFileSystemId"]
    volumes = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in plan.of_type(PV)}
    claims = [r.inputs for r in plan.of_type(PVC) if r.inputs["metadata"]["name"] == SHARED_PVC]
    assert SLURM_NAMESPACE in {c["metadata"]["namespace"] for c in claims}
    for pvc in claims:  # the Slurm namespace's, and one in each namespace that mounts /shared (claim_in)
        namespace = pvc["metadata"]["namespace"]
        spec = volumes[claim_volume_name(SHARED_PVC, namespace)]
        assert spec["csi"] == {"driver": "fsx.csi.aws.com", "volumeHandle": cloud["id"],
                               "volumeAttributes": {"dnsname": cloud["dnsName"], "mountname": cloud["mountName"]}}
        assert spec["capacity"] == {"storage": f"{fs.inputs['storageCapacity']}Gi"}
        assert spec["accessModes"] == ["ReadWriteMany"] and spec["persistentVolumeReclaimPolicy"] == "Retain"
        assert spec["storageClassName"] == "" and "flock" in spec["mountOptions"]
        assert spec["claimRef"] == {"namespace": namespace, "name": SHARED_PVC}
        assert pvc["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                               "volumeName": claim_volume_name(SHARED_PVC, namespace),
                               "resources": {"requests": spec["capacity"]}}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_volume_and_claim_validate_strictly(stack: str, crd_registry: SchemaRegistry) -> None:
    registry = crd_registry
    plan = shipped_plan(stack)
    for kind, name in ((PV, "storage-pv"), (PVC, "storage-pvc")):
        doc = one(plan, kind, name).inputs
        assert validate_manifest(doc, registry) == [], kind
    # The validator does reject a malformed volume (so the check above can fail).
    broken = json.loads(json.dumps(one(plan, PV, "storage-pv").inputs))
    broken["spec"]["csi"]["volumeAttribute"] = broken["spec"]["csi"].pop("volumeAttributes")
    assert validate_manifest(broken, registry)


def test_csi_driver_mounts_on_every_node_and_its_controller_can_only_describe() -> None:
    plan = shipped_plan("prod")
    (driver,) = [r for r in plan.of_type(RELEASE) if r.inputs["name"] == "aws-fsx-csi-driver"]
    assert driver.inputs["chart"] == "aws-fsx-csi-driver" and driver.inputs["version"] == "1.17.0"
    assert driver.inputs["repositoryOpts"] == {"repo": "https://kubernetes-sigs.github.io/aws-fsx-csi-driver"}
    values = driver.inputs["values"]
    assert values["node"] == {"tolerateAllTaints": True}  # GPU and Trainium nodes are tainted
    assert values["controller"]["nodeSelector"] == {"node.slurm-eks.io/role": "system"}
    sa = values["controller"]["serviceAccount"]
    role = one(plan, "aws:iam/role:Role", "storage-csi-controller")
    assert sa["name"] == CSI_CONTROLLER_SA
    assert sa["annotations"]["eks.amazonaws.com/role-arn"].endswith(":role/storage-csi-controller")
    (trust,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust["Principal"]["Federated"] == plan.outputs["oidcProviderArn"]
    (sub,) = [v for k, v in trust["Condition"]["StringEquals"].items() if k.endswith(":sub")]
    assert sub == f"system:serviceaccount:kube-system:{CSI_CONTROLLER_SA}"
    policy = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "storage-csi-controller").inputs["policy"])
    assert [s["Action"] for s in policy["Statement"]] == ["fsx:DescribeFileSystems"]
    assert driver.urn in one(plan, PV, "storage-pv").dependencies
