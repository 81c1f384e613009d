"""The lifecycle controller's EC2 steps, from the stack to the loop: which stacks turn them on, what the plan gives
the controller (settings, role, RBAC, egress, the Controller's topology file), a pass that runs them, a failing
step logged without stopping the others, and the seam between the agent and the stack: the EC2 operations a pass
really calls (through the agents' boto3 client, answered by botocore's Stubber: tests/agent/ec2.py) are the
actions the stack's IAM policy grants and the deploy check's IAM rule knows."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.validation import parse_cluster_config
from components.lifecycle.node_repair import cluster_rules, namespace_rules
from components.lifecycle.node_repair import settings as repair_settings
from components.slinky.lifecycle_settings import (
    INITIAL_TOPOLOGY,
    TOPOLOGY_CONFIG_MAP,
    TOPOLOGY_NAME,
    ec2_actions,
)
from scripts.checks.iam_requests import Facts, lifecycle_calls
from slurm.agent.health.__main__ import Controller
from slurm.agent.health.ledger import ConfigMapLedger
from slurm.agent.metrics import Registry
from slurm.agent.topology.render import flat_topology_yaml
from tests.agent.ec2 import recorded_operations, stubbed_ec2
from tests.config.helpers import raw_config
from tests.health.kube_api import ApiServer, node, pod
from tests.health.test_controller import NOW, FixedSlurm
from tests.plan.fixtures import one, shipped_plan

BLOCK = "cr-0123456789abcdef0"
INSTANCE = "i-0123456789abcdef0"


def with_block() -> Any:
    raw = raw_config("prod")
    raw["partitions"]["gpu-h100"].update(capacityType="capacity-block", capacityReservationIds=[BLOCK])
    return parse_cluster_config(raw, "prod")[0]


def test_prod_places_its_efa_partitions_dev_has_none() -> None:
    prod = repair_settings(parse_cluster_config(raw_config("prod"), "prod")[0]).document()
    assert prod["topology"]["configMap"] == TOPOLOGY_CONFIG_MAP and prod["capacityBlocks"] == {}
    dev = repair_settings(parse_cluster_config(raw_config("dev"), "dev")[0]).document()
    assert dev["topology"] is None and dev["capacityBlocks"] == {}
    assert repair_settings(with_block()).capacity_blocks == {"gpu-h100": [BLOCK]}


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


def test_a_pass_runs_each_ec2_step_and_a_failing_one_does_not_stop_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = ApiServer()
    try:
        kube = fake.client()
        settings = json.loads(repair_settings(with_block()).json())
        controller = Controller.from_settings(settings)
        assert controller.topology is not None and controller.blocks == {"gpu-h100": [BLOCK]}
        ec2, stub = stubbed_ec2(monkeypatch)
        for operation, params in (("describe_instance_topology", {"InstanceIds": [INSTANCE]}),
                                  ("describe_capacity_reservations", {"CapacityReservationIds": [BLOCK]})):
            stub.add_client_error(operation, "UnauthorizedOperation", "not allowed", 403, expected_params=params)
        fake.pods["gpu-h100-0"] = pod("gpu-h100-0", "ip-10-0-0-1")
        fake.nodes["ip-10-0-0-1"] = node("ip-10-0-0-1", INSTANCE)
        logs: list[dict[str, Any]] = []
        controller.one_pass(FixedSlurm([]), kube, ConfigMapLedger(kube), Registry(), NOW, logs.append, ec2=ec2)
        stub.assert_no_pending_responses()  # both steps called EC2, in this order
        errors = [e for e in logs if e["event"] == "error"]
        assert [e["step"] for e in errors] == ["topology", "capacity-blocks"]
        assert all("UnauthorizedOperation" in e["error"] for e in errors)
    finally:
        fake.close()


def fake_scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `scontrol` first on PATH that knows no reservation and accepts every command, logging each argv."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "scontrol"
    script.write_text(f'#!/bin/sh\necho "$@" >> {folder}/argv\necho "No reservations in the system"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    return folder / "argv"


@pytest.mark.parametrize("stack", ["prod", "prod-with-a-capacity-block"])
def test_the_ec2_calls_of_a_pass_are_the_actions_the_stack_grants(
        stack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every EC2 operation the agent code calls in a full pass, as botocore is asked for it, against what the
    stack's IAM policy allows (components/slinky/lifecycle_settings.py ec2_actions) and what the deploy check's IAM
    rule expects the controller to call (scripts/checks/iam_requests.py lifecycle_calls): a call added to the
    agent without its action, or an action granted that nothing calls, fails here."""
    config = with_block() if stack.endswith("block") else parse_cluster_config(raw_config("prod"), "prod")[0]
    settings = json.loads(repair_settings(config).json())
    controller = Controller.from_settings(settings)
    scontrol = fake_scontrol(tmp_path, monkeypatch)
    ec2, stub = stubbed_ec2(monkeypatch)
    called = recorded_operations(ec2)
    stub.add_response("describe_instance_topology", {"Instances": [
        {"InstanceId": INSTANCE, "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-west-2a",
         "NetworkNodes": ["nn-0a1b2c3d4e5f60701", "nn-1b2c3d4e5f6a70801", "nn-2c3d4e5f6a7b80901"]}]},
        {"InstanceIds": [INSTANCE]})
    if controller.blocks:
        end = datetime.fromtimestamp(NOW, UTC) + timedelta(days=7)
        stub.add_response("describe_capacity_reservations", {"CapacityReservations": [
            {"CapacityReservationId": BLOCK, "ReservationType": "capacity-block", "EndDate": end}]},
            {"CapacityReservationIds": [BLOCK]})
    fake = ApiServer()
    try:
        kube = fake.client()
        fake.pods["gpu-h100-0"] = pod("gpu-h100-0", "ip-10-0-0-1")
        fake.nodes["ip-10-0-0-1"] = node("ip-10-0-0-1", INSTANCE)
        logs: list[dict[str, Any]] = []
        controller.one_pass(FixedSlurm([]), kube, ConfigMapLedger(kube), Registry(), NOW, logs.append, ec2=ec2)
    finally:
        fake.close()
    stub.assert_no_pending_responses()
    assert [e for e in logs if e["event"] == "error"] == []  # every step ran through
    assert bool(controller.blocks) == scontrol.exists()  # the block's reservation was made
    calls = {f"ec2:{name}" for name in called}
    assert calls == set(ec2_actions(config))
    facts = Facts(partition="aws", region=config.region, account="123456789012", cluster="c",
                  kubernetes_version="1.33", lifecycle=settings)
    assert calls == {c.request.action for c in lifecycle_calls(facts)}


# What the import loads, printed by the child: top-level modules outside the standard library. The child runs
# with -S (no site: no .pth file, so not this project's editable install) and only boto3's site-packages folder
# added after the laid-out code.
LOADED = ("import json, sys; sys.path.append(sys.argv[1]); import slurm.agent.health.__main__ as m; "
          "print(json.dumps({'file': m.__file__, "
          "'errors': [e.__name__ for e in m.STEP_ERRORS], 'loaded': sorted({n.split('.')[0] for n in sys.modules} "
          "- set(sys.stdlib_module_names) - set(sys.builtin_module_names) - {'__main__', '__mp_main__'})}))")
# botocore imports certifi when it is there and falls back to its own CA bundle otherwise (botocore/httpsession.py).
OPTIONAL = {"certifi"}


def boto3_distributions() -> set[str]:
    """boto3 and what it requires, transitively, by its installed metadata (extras left out)."""
    seen: set[str] = set()
    todo = ["boto3"]
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name not in seen:
            seen.add(name)
            todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in metadata.requires(name) or ()
                     if "extra ==" not in r]
    return seen


def test_the_controller_runs_the_agent_image_as_slurm_user_its_one_root_step_with_chown_alone() -> None:
    deployment = one(shipped_plan("prod"), "kubernetes:apps/v1:Deployment", "repair-deployment").inputs
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {"runAsUser": 401, "runAsGroup": 401, "runAsNonRoot": True, "fsGroup": 401,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    assert container["args"] == ["lifecycle", "--conf-server", "slurm-controller.slurm:6817",
                                 "--settings", "/etc/slurm-eks/repair/settings.json"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    (init,) = pod["initContainers"]
    assert init["image"] == container["image"]
    assert init["command"] == ["install", "-d", "-o", "401", "-g", "401", "-m", "0750",
                               "/shared/.slurm-eks/active-checks"]
    # root, with the runtime's default capabilities less all but CHOWN (containerd's default set, 14)
    assert init["securityContext"]["runAsUser"] == 0
    assert "CHOWN" not in init["securityContext"]["capabilities"]["drop"]
    assert len(init["securityContext"]["capabilities"]["drop"]) == 13
    assert "add" not in init["securityContext"]["capabilities"]
    # the settings ConfigMap holds the document alone: no code
    settings_map = next(r for r in shipped_plan("prod").of_type("kubernetes:core/v1:ConfigMap")
                        if r.inputs["metadata"]["name"] == "slurm-eks-repair-settings")
    assert set(settings_map.inputs["data"]) == {"settings.json"}
