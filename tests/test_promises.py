"""What README.md and docs/ promise about safety and durability, checked on the offline plans of the shipped
stacks (and a variant where a promise needs a setting no shipped stack has), independently of tests/golden."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.compute.nodepools import drift_blocked_outside
from components.config.cluster import MaintenanceWindow
from scripts.offline.plan_model import Plan, PlannedResource
from tests.config.helpers import raw_config
from tests.plan.fixtures import one, shipped_plan
from tests.slinky.helpers import objects, plan_of, variant

STACKS = ["dev", "prod"]
RDS = "aws:rds/instance:Instance"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
IMDSV2_ONE_HOP = {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}


def _specs(plan: Plan, kind: str) -> dict[str, dict[str, Any]]:
    specs = {name: doc["spec"] for name, doc in objects(plan, kind).items()}
    assert specs, f"no {kind} in the plan"
    return specs


@pytest.mark.parametrize("stack", STACKS)
def test_nodepools_never_take_a_node_from_under_a_job(stack: str) -> None:
    """docs/nodes.md: "Nodes are never taken from under a running job. The NodePool's disruption settings
    are: `consolidationPolicy: WhenEmpty` ..., `expireAfter: Never` ..., a budget of `0` for `Drifted` outside
    the maintenance window ..., with at most 20% of a partition's nodes disrupted at once", and no
    `terminationGracePeriod`, so a node whose slurmd pod runs a job is never a drift candidate. (README.md: "a
    node is never taken from under a running job")"""
    window = raw_config(stack).get("nodeImage", {}).get("maintenanceWindow")
    expected = drift_blocked_outside(MaintenanceWindow.model_validate(window) if window else MaintenanceWindow())
    for name, spec in _specs(shipped_plan(stack), "NodePool").items():
        disruption = spec["disruption"]
        assert disruption["consolidationPolicy"] == "WhenEmpty", name
        assert spec["template"]["spec"]["expireAfter"] == "Never", name
        assert "terminationGracePeriod" not in spec["template"]["spec"], name
        drift = [b for b in disruption["budgets"] if "Drifted" in b.get("reasons", [])]
        assert drift == [expected] and expected["nodes"] == "0", name
        assert {"nodes": "20%"} in disruption["budgets"], name


@pytest.mark.parametrize("stack", STACKS)
def test_slurmd_pods_are_never_replaced_or_evicted_under_a_job(stack: str) -> None:
    """docs/operating.md: "busy pods are protected by a PodDisruptionBudget, and NodeSets update `OnDelete`,
    so a new image never replaces a pod under a running job." (Slinky's `workloadDisruptionProtection`
    makes the operator keep that PodDisruptionBudget.)"""
    for name, spec in _specs(shipped_plan(stack), "NodeSet").items():
        assert spec["updateStrategy"] == {"type": "OnDelete"}, name
        assert spec["workloadDisruptionProtection"] is True, name


@pytest.mark.parametrize("stack", STACKS)
def test_nodes_take_imdsv2_only_with_one_hop(stack: str) -> None:
    """docs/nodes.md: "IMDSv2 only with a hop limit of 1 (pods cannot read the node's credentials)";
    docs/architecture.md: the system and login node groups have "IMDSv2 with hop limit 1"."""
    plan = shipped_plan(stack)
    for name, spec in _specs(plan, "EC2NodeClass").items():
        options = spec["metadataOptions"]
        assert {k: options.get(k) for k in IMDSV2_ONE_HOP} == IMDSV2_ONE_HOP, name
    templates = plan.of_type(LAUNCH_TEMPLATE)
    assert {t.name for t in templates} == {"eks-system", "eks-login"}  # both managed node groups
    for template in templates:
        options = template.inputs["metadataOptions"]
        assert {k: options.get(k) for k in IMDSV2_ONE_HOP} == IMDSV2_ONE_HOP, template.name


@pytest.mark.parametrize("stack", STACKS)
def test_node_volumes_are_encrypted_gp3(stack: str) -> None:
    """docs/nodes.md: "an encrypted 200 GiB gp3 root volume"; docs/architecture.md: the system nodes'
    "encrypted gp3"."""
    plan = shipped_plan(stack)
    for name, spec in _specs(plan, "EC2NodeClass").items():
        (root,) = spec["blockDeviceMappings"]
        assert root["rootVolume"] is True, name
        assert {k: root["ebs"][k] for k in ("encrypted", "volumeType", "volumeSize")} == {
            "encrypted": True, "volumeType": "gp3", "volumeSize": "200Gi"}, name
    for mapping in (m for t in plan.of_type(LAUNCH_TEMPLATE) for m in t.inputs["blockDeviceMappings"]):
        assert mapping["ebs"]["encrypted"] in (True, "true") and mapping["ebs"]["volumeType"] == "gp3"


@pytest.mark.parametrize("stack", STACKS)
def test_controller_state_survives_a_restart_on_an_encrypted_retained_volume(stack: str) -> None:
    """docs/operating.md: "slurmctld's state lives on an encrypted gp3 volume, so running and pending jobs
    survive a controller restart"."""
    plan = shipped_plan(stack)
    (controller,) = _specs(plan, "Controller").values()
    persistence = controller["persistence"]
    assert persistence["enabled"] is True
    storage_class = objects(plan, "StorageClass")[persistence["storageClassName"]]
    assert storage_class["provisioner"] == "ebs.csi.aws.com"
    assert storage_class["parameters"]["encrypted"] == "true" and storage_class["parameters"]["type"] == "gp3"
    assert storage_class["reclaimPolicy"] == "Retain"  # the state outlives its claim too


def test_accounting_database_is_private_encrypted_and_protected() -> None:
    """docs/operating.md: Amazon RDS is "private, encrypted, reachable only from the cluster's nodes,
    deletion-protected, final snapshot, `protect`ed in Pulumi"."""
    db: PlannedResource = one(shipped_plan("prod"), RDS)
    assert db.protect is True
    assert db.inputs["publiclyAccessible"] is False and db.inputs["storageEncrypted"] is True
    assert db.inputs["deletionProtection"] is True
    assert db.inputs["skipFinalSnapshot"] is False and db.inputs["finalSnapshotIdentifier"]


def test_every_file_system_is_protected_and_retained_and_a_persistent_one_leaves_a_final_backup() -> None:
    """docs/operating.md: "The file system is `protect`ed and `retain_on_delete` whatever the stack says (dev's
    scratch one too) ... A persistent one also takes a final backup when it is deleted". And "All file systems
    ... are encrypted at rest and in transit by FSx" (which SCRATCH_1 does not do in transit)."""
    persistent, scratch = one(shipped_plan("prod"), FSX), one(shipped_plan("dev"), FSX)
    assert (persistent.inputs["deploymentType"], persistent.protect, persistent.retain_on_delete) == (
        "PERSISTENT_2", True, True)
    assert (scratch.inputs["deploymentType"], scratch.protect, scratch.retain_on_delete) == ("SCRATCH_2", True, True)
    assert persistent.inputs["skipFinalBackup"] is False and "skipFinalBackup" not in scratch.inputs


def test_exactly_the_partition_marked_default_is_default() -> None:
    """docs/config.md: `default` is "the partition `sbatch` uses without `-p` (exactly one when there are
    several)"; docs/operating.md: `sinfo` shows "`*` on the default one"."""
    plan = shipped_plan("prod")
    lines = {name: spec["partition"]["config"].split() for name, spec in _specs(plan, "NodeSet").items()}
    assert {name: "Default=YES" in words for name, words in lines.items()} == {
        "gpu-h100": True, "gpu-a100": False, "trainium": False}
    login_file = json.loads(objects(plan, "ConfigMap")["slurm-eks-partitions"]["data"]["partitions.json"])
    assert {name: p["default"] for name, p in login_file.items()} == {
        "gpu-h100": True, "gpu-a100": False, "trainium": False}


def test_partitions_keep_min_nodes_and_scale_up_to_max_nodes(tmp_path: Path) -> None:
    """docs/operating.md: "KEDA sets each partition's NodeSet to the nodes it needs ..., between `minNodes`
    and `maxNodes`"; docs/nodes.md: idle slurmd pods "are scaled down to `minNodes`". No shipped stack has
    minNodes > 0, so this variant gives gpu-a100 two warm nodes."""
    plan = plan_of(variant("prod", lambda raw: raw["partitions"]["gpu-a100"].update(minNodes=2, maxNodes=16)),
                   tmp_path)
    replicas = {name: spec["replicas"] for name, spec in _specs(plan, "NodeSet").items()}
    assert replicas == {"gpu-h100": 0, "gpu-a100": 2, "trainium": 0}
    bounds = {name: (spec["minReplicaCount"], spec["maxReplicaCount"])
              for name, spec in _specs(plan, "ScaledObject").items()}
    assert bounds == {"gpu-h100": (0, 8), "gpu-a100": (2, 16), "trainium": (0, 32)}
