"""The lifecycle controller's EC2 steps, from the stack to the loop: which stacks turn them on, what the plan gives
the controller (settings, role, RBAC, egress, the Controller's topology file), and a pass that runs them, a
failing step logged without stopping the others."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import yaml

from components.config.validation import parse_cluster_config
from components.lifecycle.node_repair import cluster_rules, namespace_rules
from components.lifecycle.node_repair import settings as repair_settings
from components.slinky.lifecycle_settings import (
    INITIAL_TOPOLOGY,
    TOPOLOGY_CONFIG_MAP,
    TOPOLOGY_NAME,
    lifecycle_settings,
)
from slurm.agent.metrics import Registry
from slurm.aws.query import AwsError
from slurm.health.__main__ import Controller
from slurm.health.ledger import ConfigMapLedger
from slurm.topology.render import flat_topology_yaml
from tests.config.helpers import raw_config
from tests.health.kube_api import ApiServer, node, pod
from tests.health.test_controller import NOW, FixedSlurm
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


def test_a_pass_runs_each_ec2_step_and_a_failing_one_does_not_stop_the_next() -> None:
    fake = ApiServer()
    try:
        kube = fake.client()
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
        # the topology step read the slurmd pods and the nodes before EC2 refused; it wrote nothing
        assert ("GET", "/api/v1/namespaces/slurm/pods") in fake.calls() and ("GET", "/api/v1/nodes") in fake.calls()
        assert not [r for r in fake.requests if r.method not in ("GET",)]
    finally:
        fake.close()
