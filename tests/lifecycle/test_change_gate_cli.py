"""`slurm-eks up|preview|diff` judge a change against what is deployed: on prod's stack a deploymentType change, a
clusterName change and an FSx subnet change are refused before Pulumi runs, each with its fix; the offline diff
marks the FSx subnet change as a replacement; a stateful replacement in `pulumi preview --json` stops `up` unless
allowed by URN. Pulumi is the stand-in tests/standins/pulumi; the AWS account is moto's (tests/preflight)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.cluster import FULL_KEY
from tests.lifecycle.test_gates import REPO, calls, invoke, pulumi  # noqa: F401 (fixture)
from tests.preflight.conftest import aws, prod_account, quotas  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow  # each plans prod offline

FSX_URN = ("urn:pulumi:prod::slurm-eks::slurm-eks:index:SharedStorage$aws:fsx/lustreFileSystem:LustreFileSystem::"
           "storage-fsx")


def edited_prod(tmp_path: Path, mutate: Callable[[dict[str, Any]], None]) -> Path:
    """A stacks directory whose prod is the repository's with `mutate` applied (the file's other keys kept)."""
    stacks = tmp_path / "stacks"
    shutil.copytree(REPO / "stacks", stacks)
    document = yaml.safe_load((stacks / "Pulumi.prod.yaml").read_text())
    mutate(document["config"][FULL_KEY])
    (stacks / "Pulumi.prod.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return stacks


def deployed_prod(tmp_path: Path) -> Path:
    """The record of the repository's prod as deployed: its plan's outputs carry it."""
    out = tmp_path / "deployed"
    result = invoke("plan", "--stack", "prod", "--out", str(out))
    assert result.exit_code == 0, result.output
    return out / "plan.json"


def scratch(c: dict[str, Any]) -> None:
    c["storage"]["fsx"] = {"deploymentType": "SCRATCH_2", "capacityGiB": c["storage"]["fsx"]["capacityGiB"]}


@pytest.mark.parametrize(("key", "mutate", "fix"), [
    ("storage.fsx.deploymentType", scratch, "copy /shared to it"),
    ("clusterName", lambda c: c.__setitem__("clusterName", "slurm-eks-prod-2"), "a new name is a new stack"),
    ("network.efaAvailabilityZone", lambda c: c["network"].__setitem__("efaAvailabilityZone", "us-west-2b"),
     "a new zone is a new file system"),
])
def test_prod_refuses_what_would_replace_its_cluster_or_data_before_pulumi_runs(
        pulumi: Path, prod_account: dict, tmp_path: Path,  # noqa: F811
        key: str, mutate: Callable[[dict[str, Any]], None], fix: str) -> None:
    record = deployed_prod(tmp_path)
    stacks = edited_prod(tmp_path, mutate)
    result = invoke("up", "--stack", "prod", "--stacks-dir", str(stacks), "--deployed", str(record), "--yes")
    assert result.exit_code == 1, result.output
    assert f"~ {key}:" in result.output and "needs a new cluster (refused)" in result.output
    assert fix in result.output and f"REFUSED: name it in `--force {key}`" in result.output
    assert calls(pulumi) == []  # neither preview nor up ran


def test_the_offline_diff_marks_the_fsx_subnet_change_as_a_replacement(tmp_path: Path) -> None:
    before = deployed_prod(tmp_path).parent
    stacks = edited_prod(tmp_path, lambda c: c["network"].__setitem__("efaAvailabilityZone", "us-west-2b"))
    after = tmp_path / "after"
    assert invoke("plan", "--stack", "prod", "--stacks-dir", str(stacks), "--out", str(after)).exit_code == 0
    result = invoke("diff", str(before), str(after))
    assert "+- aws:fsx/lustreFileSystem:LustreFileSystem storage-fsx (replace: subnetIds" in result.output
    assert "~ network.efaAvailabilityZone: 'us-west-2a' -> 'us-west-2b'" in result.output
    document = json.loads(invoke("diff", str(before), str(after), "--format", "json").output)
    fsx = next(c for c in document["changed"] if c["urn"] == FSX_URN)
    assert fsx["replace"] and fsx["replace"][0].startswith("subnetIds")
    assert document["config"]["refused"] >= 1


def test_a_stateful_replacement_in_the_preview_stops_up_unless_allowed(
        pulumi: Path, prod_account: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    preview = tmp_path / "preview.json"
    preview.write_text(json.dumps({"steps": [{
        "op": "replace", "urn": FSX_URN, "replaceReasons": ["subnetIds"],
        "newState": {"type": "aws:fsx/lustreFileSystem:LustreFileSystem"}}]}))
    monkeypatch.setenv("PULUMI_STANDIN_PREVIEW", str(preview))
    record = deployed_prod(tmp_path)
    refused = invoke("up", "--stack", "prod", "--deployed", str(record), "--yes")
    assert refused.exit_code == 1, refused.output
    assert f"refused: replace of stateful aws:fsx/lustreFileSystem:LustreFileSystem {FSX_URN}" in refused.output
    assert [c[0] for c in calls(pulumi)] == ["preview"]
    allowed = invoke("up", "--stack", "prod", "--deployed", str(record), "--yes", "--allow-replace", FSX_URN,
                     "--apply-immediately")
    assert allowed.exit_code == 0, allowed.output
    assert [c[0] for c in calls(pulumi)] == ["preview", "preview", "up"]
    given = json.loads(pulumi.read_text().splitlines()[-1])["env"]
    assert given["SLURM_EKS_APPLY_IMMEDIATELY"] == "1"


def test_the_record_is_read_from_the_stacks_output_and_a_partition_nobody_checked_stays(
        pulumi: Path, prod_account: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    record = json.loads(deployed_prod(tmp_path).read_text())["outputs"]["deployedConfig"]
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"deployedConfig": record}))
    monkeypatch.setenv("PULUMI_STANDIN_OUTPUTS", str(outputs))
    bare = tmp_path / "bin"  # the stand-in and python3, no kubectl: the cluster cannot be asked
    bare.mkdir()
    (bare / "pulumi").symlink_to(REPO / "tests" / "standins" / "pulumi")
    (bare / "python3").symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setenv("PATH", str(bare))
    stacks = edited_prod(tmp_path, lambda c: c["partitions"].pop("trainium"))
    result = invoke("up", "--stack", "prod", "--stacks-dir", str(stacks), "--yes")
    assert result.exit_code == 1, result.output
    assert "- partitions.trainium: removed" in result.output
    assert "cannot tell whether partition trainium is idle (`kubectl` is not on PATH)" in result.output
    assert "scontrol update PartitionName=trainium State=DRAIN" in result.output
    assert [c[:3] for c in calls(pulumi)] == [["stack", "output", "deployedConfig"]]


def test_changes_runs_the_day_two_gates_alone(pulumi: Path, tmp_path: Path) -> None:  # noqa: F811
    """What the deploy workflow runs before its `pulumi up` (.github/actions/pulumi-up): refused before Pulumi
    previews; an unchanged config goes on to `pulumi preview --json` and passes."""
    record = deployed_prod(tmp_path)
    stacks = edited_prod(tmp_path, lambda c: c.__setitem__("clusterName", "slurm-eks-prod-2"))
    refused = invoke("changes", "--stack", "prod", "--stacks-dir", str(stacks), "--deployed", str(record))
    assert refused.exit_code == 1 and "REFUSED" in refused.output and calls(pulumi) == []
    same = invoke("changes", "--stack", "prod", "--deployed", str(record))
    assert same.exit_code == 0, same.output
    assert "no change against the deployed one" in same.output and "stack prod: no change refused" in same.output
    assert [c[0] for c in calls(pulumi)] == ["preview"]
