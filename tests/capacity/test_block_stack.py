"""A stack with a Capacity Block partition end to end offline: it validates, plans (the NodePool asks for the
block, the lifecycle controller gets the block and may read it), and passes the deploy check and policy pack.
Its preflight against moto is tests/preflight/test_checks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from components.config.stackfile import load_stack
from scripts.checks.deploy import check_stack
from scripts.offline.plan import run_plan
from scripts.offline.plan_model import Plan
from tests.plan.fixtures import one

BLOCK = "cr-0123456789abcdef0"


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stacks")
    document = yaml.safe_load(Path("stacks/Pulumi.prod.yaml").read_text())
    partition = document["config"]["slurm-eks:cluster"]["partitions"]["gpu-h100"]
    partition.update(capacityType="capacity-block", capacityReservationIds=[BLOCK])
    (folder / "Pulumi.block.yaml").write_text(yaml.safe_dump(document))
    return folder


@pytest.fixture(scope="module")
def plan(stacks: Path) -> Plan:
    return run_plan("block", stacks)[0]


def test_it_validates(stacks: Path) -> None:
    config, _ = load_stack("block", stacks)
    assert config.partitions["gpu-h100"].capacity_type == "capacity-block"


def test_the_nodes_launch_into_the_block_only(plan: Plan) -> None:
    pool = next(m for m in plan.manifests() if m["kind"] == "NodePool" and m["metadata"]["name"] == "gpu-h100")
    requirements = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert requirements["karpenter.sh/capacity-type"] == ["reserved"]
    assert requirements["karpenter.k8s.aws/capacity-reservation-type"] == ["capacity-block"]
    node_class = next(m for m in plan.manifests()
                      if m["kind"] == "EC2NodeClass" and m["metadata"]["name"] == "gpu-h100")
    assert node_class["spec"]["capacityReservationSelectorTerms"] == [{"id": BLOCK}]
    assert "placementGroupSelector" not in node_class["spec"]


def test_the_lifecycle_controller_holds_the_block_and_may_read_it(plan: Plan) -> None:
    settings = json.loads(next(m for m in plan.manifests() if m["kind"] == "ConfigMap"
                               and m["metadata"]["name"] == "slurm-eks-repair-settings")["data"]["settings.json"])
    assert settings["capacityBlocks"] == {"gpu-h100": [BLOCK]}
    policy = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "repair-ec2").inputs["policy"])
    assert policy["Statement"][0]["Action"] == ["ec2:DescribeInstanceTopology", "ec2:DescribeCapacityReservations"]


def test_the_deploy_check_passes(stacks: Path) -> None:
    _, findings = check_stack("block", stacks)
    assert [f for f in findings if f.severity == "error"] == []
