"""Replace against update: the offline diff marks a replacement from the providers' replace-triggering inputs, and
`pulumi preview --json` steps that replace or delete a stateful resource are refused unless allowed by URN."""

from __future__ import annotations

import json

from scripts.change.replacements import STATEFUL, blocked, preview_steps, render_steps, triggers
from scripts.offline.diff import PropertyChange

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
FSX_URN = f"urn:pulumi:prod::slurm-eks::slurm-eks:index:SharedStorage${FSX}::storage-fsx"
RDS_URN = "urn:pulumi:prod::slurm-eks::slurm-eks:index:AccountingDatabase$aws:rds/instance:Instance::slurm-db-mariadb"


def test_replace_triggering_inputs_mark_a_replacement_and_others_an_update() -> None:
    assert triggers(FSX, [PropertyChange("inputs.subnetIds", "subnet-a", "subnet-b")]) == ["subnetIds"]
    assert triggers(FSX, [PropertyChange("inputs.deploymentType", "PERSISTENT_2", "SCRATCH_2")]) == ["deploymentType"]
    assert triggers(FSX, [PropertyChange("inputs.perUnitStorageThroughput", 125, 250)]) == []
    assert triggers(FSX, [PropertyChange("protect", True, False)]) == []  # an option, not an input


def test_a_capacity_replaces_only_when_it_falls() -> None:
    assert triggers(FSX, [PropertyChange("inputs.storageCapacity", 2400, 4800)]) == []
    assert triggers(FSX, [PropertyChange("inputs.storageCapacity", 4800, 2400)]) == ["storageCapacity"]


def test_nested_and_kubernetes_paths() -> None:
    claim = "kubernetes:core/v1:PersistentVolumeClaim"
    assert triggers(claim, [PropertyChange("inputs.spec.resources.requests.storage", "1Gi", "2Gi")]) == []
    assert triggers(claim, [PropertyChange("inputs.spec.storageClassName", "a", "b")]) == ["spec.storageClassName"]
    assert triggers("kubernetes:slinky.slurm.net/v1beta1:NodeSet",
                    [PropertyChange("inputs.metadata.name", "a", "b")]) == ["metadata.name"]
    assert triggers("eks:index:ManagedNodeGroup", [PropertyChange("inputs.instanceTypes[0]", "m7i.xlarge",
                                                                  "m7i.2xlarge")]) == ["instanceTypes[0]"]


def preview(*steps: dict[str, object]) -> str:
    """A PreviewDigest as `pulumi preview --json` prints it (pulumi/pulumi pkg/display/json.go)."""
    return json.dumps({"steps": list(steps), "changeSummary": {}, "duration": 1})


def step(op: str, urn: str, type_: str, reasons: list[str] | None = None) -> dict[str, object]:
    return {"op": op, "urn": urn, "newState": {"type": type_, "urn": urn}, "replaceReasons": reasons,
            "detailedDiff": None}


def test_a_stateful_replacement_or_deletion_is_refused_unless_allowed() -> None:
    steps = preview_steps(preview(step("replace", FSX_URN, FSX, ["subnetIds"]),
                                  {"op": "delete", "urn": RDS_URN, "oldState": {"type": "aws:rds/instance:Instance"}},
                                  step("update", FSX_URN, FSX),
                                  step("replace", "urn:pulumi:prod::slurm-eks::aws:iam/role:Role::r",
                                       "aws:iam/role:Role")))
    assert [(s.op, s.urn) for s in blocked(steps, [])] == [("replace", FSX_URN), ("delete", RDS_URN)]
    assert [s.urn for s in blocked(steps, [FSX_URN])] == [RDS_URN]
    assert "replace aws:fsx/lustreFileSystem:LustreFileSystem" in render_steps(steps)
    assert "(because subnetIds)" in render_steps(steps)


def test_replace_reasons_come_from_the_detailed_diff_when_absent() -> None:
    doc = preview({"op": "replace", "urn": FSX_URN, "newState": {"type": FSX},
                   "detailedDiff": {"subnetIds[0]": {"kind": "update-replace", "inputDiff": True},
                                    "tags": {"kind": "update", "inputDiff": True}}})
    assert preview_steps(doc)[0].reasons == ("subnetIds[0]",)


def test_the_stateful_types_hold_data() -> None:
    assert {FSX, "aws:rds/instance:Instance", "aws:efs/fileSystem:FileSystem", "eks:index:Cluster",
            "kubernetes:core/v1:PersistentVolume"} <= STATEFUL
