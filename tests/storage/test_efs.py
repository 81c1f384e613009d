"""EFS model storage (storage.efs) in the plan: the file system, who may reach it, the CSI driver and its
IAM, the efs-ap class and claim, the read-only /models mounts, and the deploy check's NFS flow."""

from __future__ import annotations

import copy
import json

import pytest

from components.aws.iam import Scope
from components.config.efs import MODEL_DIRECTORY, MODEL_PVC, STORAGE_CLASS, Efs, model_volume
from components.config.stackfile import load_stack
from components.names import SLURM_NAMESPACE, claim_volume_name
from components.storage.efs import CSI_CONTROLLER_SA, NFS_PORT, csi_controller_policy
from scripts.checks import network
from scripts.manifests.manifest_schema import SchemaRegistry, validate_manifest
from scripts.offline.mocks import cluster_security_group_id
from scripts.offline.plan_model import Plan
from tests.config.helpers import raw_config
from tests.plan.fixtures import one, shipped_plan
from tests.slinky.helpers import objects, releases

EFS = "aws:efs/fileSystem:FileSystem"
MOUNT_TARGET = "aws:efs/mountTarget:MountTarget"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
ACCESS_POINT = "aws:efs/accessPoint:AccessPoint"
SC, PVC = "kubernetes:storage.k8s.io/v1:StorageClass", "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"


def _efs_group(plan: Plan) -> str:
    groups = {g for t in plan.of_type(MOUNT_TARGET) for g in t.inputs["securityGroups"]}
    (group,) = groups
    return group


def test_the_file_system_is_encrypted_protected_and_retained() -> None:
    fs = one(shipped_plan("prod"), EFS)
    assert fs.inputs["encrypted"] is True
    assert fs.protect and fs.retain_on_delete
    assert fs.inputs["performanceMode"] == "generalPurpose" and fs.inputs["throughputMode"] == "elastic"
    assert "provisionedThroughputInMibps" not in fs.inputs


def test_one_mount_target_in_each_private_subnet() -> None:
    plan = shipped_plan("prod")
    zones = raw_config("prod")["network"]["availabilityZones"]
    private = {one(plan, "aws:ec2/routeTableAssociation:RouteTableAssociation", f"network-private-{z}")
               .inputs["subnetId"] for z in zones}
    targets = plan.of_type(MOUNT_TARGET)
    assert len(targets) == len(zones) and {t.inputs["subnetId"] for t in targets} == private


def test_only_the_nodes_reach_nfs_and_nothing_else_is_open() -> None:
    plan = shipped_plan("prod")
    group = _efs_group(plan)
    rules = [r for r in plan.of_type(INGRESS) + plan.of_type(EGRESS) if r.inputs["securityGroupId"] == group]
    assert [(r.type, r.inputs["ipProtocol"], r.inputs["fromPort"], r.inputs["toPort"],
             r.inputs["referencedSecurityGroupId"]) for r in rules] == [
        (INGRESS, "tcp", NFS_PORT, NFS_PORT, cluster_security_group_id(plan.outputs["clusterName"]))]


def test_dev_has_no_model_storage_and_no_models_mount() -> None:
    plan = shipped_plan("dev")
    assert not plan.of_type(EFS) and not plan.of_type(MOUNT_TARGET)
    assert "aws-efs-csi-driver" not in releases(plan)
    for kind in ("LoginSet", "NodeSet"):
        for doc in objects(plan, kind).values():
            assert "models" not in json.dumps(doc["spec"]["template"]), kind


def test_storage_class_for_claims_of_peoples_own() -> None:
    plan = shipped_plan("prod")
    (sc,) = [r for r in plan.of_type(SC) if r.inputs["metadata"]["name"] == STORAGE_CLASS]
    fs = one(plan, EFS)
    assert sc.inputs["provisioner"] == "efs.csi.aws.com" and sc.inputs["reclaimPolicy"] == "Retain"
    params = sc.inputs["parameters"]
    assert params["provisioningMode"] == "efs-ap" and params["fileSystemId"] == fs.id
    assert params["directoryPerms"] == "700" and params["basePath"] == "/claims"
    assert (params["gidRangeStart"], params["gidRangeEnd"]) == ("50000", "60000")


def test_the_models_access_point_acts_as_its_owner_outside_the_gid_range() -> None:
    plan = shipped_plan("prod")
    (ap,) = plan.of_type(ACCESS_POINT)
    assert ap.inputs["fileSystemId"] == one(plan, EFS).id
    assert ap.inputs["posixUser"] == {"uid": 40000, "gid": 40000}
    assert ap.inputs["rootDirectory"] == {"path": MODEL_DIRECTORY, "creationInfo": {
        "ownerUid": 40000, "ownerGid": 40000, "permissions": "700"}}


def test_every_model_claim_binds_a_read_only_volume_of_the_models_access_point() -> None:
    plan = shipped_plan("prod")
    handle = f"efs:{one(plan, EFS).id}::{plan.of_type(ACCESS_POINT)[0].id}"
    volumes = {r.inputs["metadata"]["name"]: r.inputs["spec"] for r in plan.of_type(PV)}
    claims = [r.inputs for r in plan.of_type(PVC) if r.inputs["metadata"]["name"] == MODEL_PVC]
    assert SLURM_NAMESPACE in {c["metadata"]["namespace"] for c in claims}
    for claim in claims:
        namespace = claim["metadata"]["namespace"]
        assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                                 "volumeName": claim_volume_name(MODEL_PVC, namespace),
                                 "resources": {"requests": {"storage": "1024Gi"}}}
        volume = volumes[claim["spec"]["volumeName"]]
        assert volume["csi"] == {"driver": "efs.csi.aws.com", "volumeHandle": handle, "readOnly": True}
        assert volume["claimRef"] == {"namespace": namespace, "name": MODEL_PVC}
        assert volume["persistentVolumeReclaimPolicy"] == "Retain"


def test_class_and_claim_validate_strictly(crd_registry: SchemaRegistry) -> None:
    plan = shipped_plan("prod")
    docs = [r.inputs for r in plan.of_type(SC) + plan.of_type(PVC) + plan.of_type(PV)
            if r.inputs["metadata"]["name"].startswith((STORAGE_CLASS, MODEL_PVC))]
    assert {(d["kind"], d["metadata"].get("namespace")) for d in docs} >= {
        ("StorageClass", None), ("PersistentVolumeClaim", SLURM_NAMESPACE), ("PersistentVolume", None)}
    for doc in docs:
        assert validate_manifest(doc, crd_registry) == [], doc["kind"]
    broken = copy.deepcopy(docs[0])
    broken["reclaimPolicy"] = 1
    assert validate_manifest(broken, crd_registry)


@pytest.mark.parametrize("kind", ["LoginSet", "NodeSet"])
def test_login_and_compute_pods_mount_the_models_read_only(kind: str) -> None:
    plan = shipped_plan("prod")
    container = {"LoginSet": "login", "NodeSet": "slurmd"}[kind]
    for name, doc in objects(plan, kind).items():
        volumes = {v["name"]: v for v in doc["spec"]["template"]["spec"]["volumes"]}
        assert volumes["models"]["persistentVolumeClaim"] == {"claimName": MODEL_PVC, "readOnly": True}, name
        mounts = {m["name"]: m for m in doc["spec"][container]["volumeMounts"]}
        assert mounts["models"] == {"name": "models", "mountPath": "/models", "readOnly": True}, name
        assert mounts["shared"]["mountPath"] == "/shared", name


def test_model_volume_follows_the_configured_path() -> None:
    assert model_volume(None) == ([], [])
    _, mounts = model_volume(Efs(mount_path="/weights"))
    assert mounts == [{"name": "models", "mountPath": "/weights", "readOnly": True}]


def test_csi_driver_is_pinned_and_its_controller_uses_the_irsa_role() -> None:
    plan = shipped_plan("prod")
    driver = releases(plan)["aws-efs-csi-driver"]
    assert driver.inputs["version"] == "4.4.1" and driver.inputs["namespace"] == "kube-system"
    account = driver.inputs["values"]["controller"]["serviceAccount"]
    assert account["name"] == CSI_CONTROLLER_SA
    (role,) = [r for r in plan.of_type("aws:iam/role:Role") if r.name == "models-efs-csi-controller"]
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert f"system:serviceaccount:kube-system:{CSI_CONTROLLER_SA}" in json.dumps(trust)
    # The node plugin keeps the chart's toleration of every taint (GPU, Trainium, login nodes).
    assert "node" not in driver.inputs["values"]


def test_the_controller_may_only_delete_access_points_it_tagged() -> None:
    policy = csi_controller_policy(Scope("aws", "us-west-2", "123456789012"))
    actions = {a for s in policy["Statement"] for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not any(a.startswith("s3files:") for a in actions)
    (delete,) = [s for s in policy["Statement"] if s["Action"] == "elasticfilesystem:DeleteAccessPoint"]
    assert delete["Condition"]["StringEquals"]["aws:ResourceTag/efs.csi.aws.com/cluster"] == "true"
    assert delete["Resource"] == "arn:aws:elasticfilesystem:us-west-2:123456789012:access-point/*"


def test_the_deploy_check_proves_nfs_reaches_efs_from_every_node() -> None:
    config = load_stack("prod")[0]
    plan = shipped_plan("prod")
    t = network.topology(plan)
    assert t.efs is not None and t.efs.groups == (_efs_group(plan),)
    nfs = [f for f in network.flows(t, config) if f.whom is t.efs]
    assert {f.who.name for f in nfs} == {n.name for n in t.nodes} and all(f.ports == (2049, 2049) for f in nfs)
    assert network.check(plan, config) == []
    broken = copy.deepcopy(plan)
    broken.resources = [r for r in broken.resources if r.name != "models-efs-nfs-nodes"]
    found = {f.resource for f in network.check(broken, config)}
    assert "the system nodes -> EFS mount targets (tcp 2049)" in found
    assert "Karpenter nodes of gpu-h100 -> EFS mount targets (tcp 2049)" in found
