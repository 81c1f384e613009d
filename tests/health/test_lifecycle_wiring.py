"""The lifecycle controller's EC2 steps, from the stack to the loop: which stacks turn them on, what the plan gives
the controller (settings, role, RBAC, egress, the Controller's topology file), and a pass that runs them, a
failing step logged without stopping the others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

from components.config.validation import parse_cluster_config
from components.lifecycle.node_repair import cluster_rules, deployment_spec, namespace_rules, package_files
from components.lifecycle.node_repair import settings as repair_settings
from components.slinky.lifecycle_settings import (
    INITIAL_TOPOLOGY,
    TOPOLOGY_CONFIG_MAP,
    TOPOLOGY_NAME,
    lifecycle_settings,
)
from slurm.aws.query import AwsError
from slurm.health.__main__ import Controller
from slurm.health.kube import Kube
from slurm.health.ledger import ConfigMapLedger
from slurm.health.metrics import Registry
from slurm.topology.render import flat_topology_yaml
from tests.config.helpers import raw_config
from tests.health.test_controller import NOW, FixedSlurm
from tests.health.test_kube import FakeKube, node, pod
from tests.plan.fixtures import one, shipped_plan

BLOCK = "cr-0123456789abcdef0"


def with_block() -> Any:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="capacity-block", capacityReservationIds=[BLOCK])
    return parse_cluster_config(raw, "prod")[0]


def test_prod_places_its_efa_partitions_dev_has_none() -> None:
    prod = lifecycle_settings(parse_cluster_config(raw_config("prod"), "prod")[0])
    assert prod["topology"]["configMap"] == TOPOLOGY_CONFIG_MAP and prod["capacityBlocks"] == {}
    dev = lifecycle_settings(parse_cluster_config(raw_config("dev"), "dev")[0])
    assert dev["topology"] is None and dev["capacityBlocks"] == {}
    assert lifecycle_settings(with_block())["capacityBlocks"] == {"gpu-h100": [BLOCK]}


def test_rbac_grows_only_with_topology() -> None:
    prod, dev = (parse_cluster_config(raw_config(s), s)[0] for s in ("prod", "dev"))
    assert {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]} in cluster_rules(prod)
    assert all("nodes" not in r["resources"] for r in cluster_rules(dev))
    assert namespace_rules(dev)[0]["verbs"] == ["get"] and namespace_rules(prod)[0]["verbs"] == ["get", "list"]


def test_the_plan_gives_the_controller_its_topology_file_role_and_egress() -> None:
    plan = shipped_plan("prod")
    controller = one(plan, "kubernetes:slinky.slurm.net/v1beta1:Controller").inputs["spec"]
    assert {"name": TOPOLOGY_CONFIG_MAP} in controller["configFileRefs"] and controller["inplaceReconfigure"] is True
    config_map = next(r for r in plan.of_type("kubernetes:core/v1:ConfigMap")
                      if r.inputs["metadata"]["name"] == TOPOLOGY_CONFIG_MAP)
    assert yaml.safe_load(config_map.inputs["data"]["topology.yaml"]) == [
        {"topology": "ec2", "cluster_default": True, "flat": True}]
    account = one(plan, "kubernetes:core/v1:ServiceAccount", "repair-sa").inputs["metadata"]
    assert account["annotations"]["eks.amazonaws.com/role-arn"].endswith(":role/repair-ec2")
    policy = json.loads(one(plan, "aws:iam/rolePolicy:RolePolicy", "repair-ec2").inputs["policy"])
    assert policy["Statement"] == [{"Effect": "Allow", "Action": ["ec2:DescribeInstanceTopology"], "Resource": "*"}]
    egress = one(plan, "kubernetes:networking.k8s.io/v1:NetworkPolicy", "slurm-namespace-repair").inputs["spec"][
        "egress"]
    assert any(r.get("ports") == [{"port": 443, "protocol": "TCP"}] for r in egress)
    dev = shipped_plan("dev")
    assert not [r for r in dev.of_type("aws:iam/role:Role") if r.name == "repair-ec2"]
    assert "inplaceReconfigure" not in one(dev, "kubernetes:slinky.slurm.net/v1beta1:Controller").inputs["spec"]


def test_the_initial_file_is_what_the_controller_writes_before_any_node() -> None:
    assert flat_topology_yaml(TOPOLOGY_NAME) == INITIAL_TOPOLOGY


def test_a_pass_runs_each_ec2_step_and_a_failing_one_does_not_stop_the_next(tmp_path: Path) -> None:
    fake = FakeKube()
    try:
        (tmp_path / "token").write_text(fake.token)
        kube = Kube(fake.url, tmp_path / "token")
        settings = json.loads(json.dumps(repair_settings(
            with_block())))
        controller = Controller.from_settings(settings)
        assert controller.topology is not None and controller.blocks == {"gpu-h100": [BLOCK]}
        called: list[str] = []

        def ec2(action: str, params: dict[str, str]) -> ET.Element:
            called.append(action)
            raise AwsError("https://ec2.us-west-2.amazonaws.com/: HTTP 403: UnauthorizedOperation: not allowed")

        fake.pods["gpu-h100-0"] = pod("gpu-h100-0", "ip-10-0-0-1")
        fake.nodes["ip-10-0-0-1"] = node("ip-10-0-0-1", "i-0123456789abcdef0")
        logs: list[dict[str, Any]] = []
        controller.one_pass(FixedSlurm([]), kube, ConfigMapLedger(kube), Registry(), NOW, logs.append, ec2=ec2)
        assert called == ["DescribeInstanceTopology", "DescribeCapacityReservations"]
        assert [(e["event"], e["step"]) for e in logs if e["event"] == "error"] == [
            ("error", "topology"), ("error", "capacity-blocks")]
    finally:
        fake.close()


def test_the_controller_code_imports_on_python_alone(tmp_path: Path) -> None:
    """As the Deployment lays the code ConfigMap out (components/lifecycle/node_repair.py: key ->
    slurm/<package>/<file>), with
    python3 -S -E: every module the loop imports, with no site-packages."""
    spec = repair_deployment_items()
    for key, text in package_files().items():
        target = tmp_path / spec[key]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    done = subprocess.run([python, "-S", "-E", "-c", "import slurm.health.__main__ as m; print(m.STEP_ERRORS)"],
                          cwd=tmp_path, env={"PATH": os.defpath}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "AwsError" in done.stdout


def repair_deployment_items() -> dict[str, str]:
    config = parse_cluster_config(raw_config("prod"), "prod")[0]
    code = package_files()
    spec = deployment_spec(config, code, "{}")
    (volume,) = [v for v in spec["template"]["spec"]["volumes"] if v["name"] == "code"]
    return {item["key"]: item["path"] for item in volume["configMap"]["items"]}
