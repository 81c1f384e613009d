"""The settings the stack renders (components/lifecycle/node_repair.py) are the settings the controller reads
(slurm/agent/health/__main__.py): one document, checked from both ends, and one pass of the loop it drives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.config.validation import parse_cluster_config
from components.lifecycle.node_repair import ACTIVE_OUTPUT_DIR, settings
from slurm.agent.health.__main__ import Controller
from slurm.agent.health.active_runner import PartitionCheck
from slurm.agent.health.ledger import ConfigMapLedger
from slurm.agent.metrics import Registry
from tests.config.helpers import raw_config, set_at
from tests.health.kube_api import ApiServer, nodeclaim, pod
from tests.health.test_controller import NOW, FixedSlurm, drained


def rendered(**health: Any) -> dict[str, Any]:
    raw = raw_config("prod")
    set_at("health", health)(raw)
    config, _ = parse_cluster_config(raw, "prod")
    return json.loads(settings(config).json())  # as the pod reads it from the ConfigMap


def test_the_controller_reads_what_the_stack_renders() -> None:
    controller = Controller.from_settings(rendered(activeChecks={"partitions": {
        "gpu-h100": {"minBusBandwidthGBps": 350}, "trainium": {}}}))
    assert controller.checks.checks == {"gpu-h100": PartitionCheck("nccl", 8, 350.0),
                                        "trainium": PartitionCheck("neuron", 32, None)}  # trn1: 32 NeuronCores
    assert (controller.checks.interval_s, controller.checks.fraction, controller.checks.per_round) == (86400, 0.8, 2)
    assert controller.checks.probe.output_dir == Path(ACTIVE_OUTPUT_DIR)
    assert (controller.policy.max_per_hour, controller.act, controller.pass_seconds) == (2, True, 60)
    assert Controller.from_settings(rendered()).checks.checks == {}  # prod's partitions all scale to zero


def test_with_repair_off_a_pass_replaces_nothing() -> None:
    fake = ApiServer()
    try:
        fake.pods["gpu-h100-0"] = pod("gpu-h100-0", "ip-10-0-1-20.ec2.internal")
        fake.nodeclaims["gpu-h100-nc0"] = nodeclaim("gpu-h100-nc0", "ip-10-0-1-20.ec2.internal")
        kube = fake.client()
        logs: list[dict[str, Any]] = []
        for enabled, deletes in ((False, []), (True, ["/apis/karpenter.sh/v1/nodeclaims/gpu-h100-nc0"])):
            controller = Controller.from_settings(rendered(repair={"enabled": enabled}))
            controller.one_pass(FixedSlurm([drained("gpu-h100-0", 1)]), kube, ConfigMapLedger(kube), Registry(),
                                NOW, logs.append)
            assert fake.deletes() == deletes
        assert [log["event"] for log in logs] == ["replace-dry-run", "replace"]
    finally:
        fake.close()
