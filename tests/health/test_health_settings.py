"""What the stack config makes of `health`: each partition's expectations (from the catalog), which partitions
get active checks, the slurm.conf lines, and the probes' account when associations are enforced."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.cluster import ClusterConfig
from components.config.health import HEALTH_ACCOUNT
from components.config.validation import parse_cluster_config
from components.slinky.accounts_document import desired_document
from components.slinky.health_settings import active_checks, health_slurm_conf, node_health_env
from components.slinky.slurm_conf import partition_conf
from slurm.agent.accounts.desired import parse
from tests.config.helpers import raw_config, set_at


def config(stack: str, *changes: tuple[str, Any]) -> ClusterConfig:
    raw = raw_config(stack)
    for path, value in changes:
        set_at(path, value)(raw)
    return parse_cluster_config(raw, stack)[0]


def env(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.mark.parametrize(("partition", "expected"), [
    ("gpu-h100", {"GPUS": "8", "EFA": "32", "NEURON_DEVICES": "0", "DCGM_DIAG_LEVEL": "1"}),  # p5.48xlarge
    ("gpu-a100", {"GPUS": "8", "EFA": "4", "NEURON_DEVICES": "0"}),  # p4d/p4de
    ("trainium", {"GPUS": "0", "EFA": "8", "NEURON_DEVICES": "16", "DCGM_DIAG_LEVEL": "0", "JOB_MAP_DIR": ""}),
])
def test_each_partition_expects_what_its_instance_type_has(partition: str, expected: dict[str, str]) -> None:
    c = config("prod")
    found = env(node_health_env(c.partitions[partition], c))
    assert {k: found[k] for k in expected} == expected
    assert found["SHARED_MOUNT"] == "/shared" and found["MIN_FREE_MB"] == "10240"


def test_active_checks_are_off_for_scale_to_zero_partitions_unless_named() -> None:
    assert active_checks(config("prod")) == {}  # every prod partition has minNodes 0
    assert list(active_checks(config("prod", ("partitions.gpu-a100.minNodes", 2)))) == ["gpu-a100"]
    opted = config("prod", ("health", {"activeChecks": {"partitions": {"gpu-h100": {"minBusBandwidthGBps": 350}}}}))
    assert {n: c.min_bus_bandwidth_gbps for n, c in active_checks(opted).items()} == {"gpu-h100": 350}
    out = config("prod", ("partitions.gpu-a100.minNodes", 2),
                 ("health", {"activeChecks": {"partitions": {"gpu-a100": {"enabled": False}}}}))
    assert active_checks(out) == {}


def test_slurm_conf_runs_the_checks_and_requeues_without_hold() -> None:
    lines = health_slurm_conf(config("dev"))
    assert lines["HealthCheckProgram"] == "/etc/slurm-eks/node-check.sh"
    # Contain: what the per-job /tmp and /dev/shm need (components/slinky/slurm_conf.py NamespaceType).
    assert (lines["HealthCheckInterval"], lines["PrologFlags"]) == ("300", "Alloc,Contain")
    assert lines["SchedulerParameters"] == "nohold_on_prolog_fail"


def test_probes_get_an_account_the_checked_partition_admits() -> None:
    c = config("prod", ("health", {"activeChecks": {"partitions": {"trainium": {}}}}))
    assert partition_conf("trainium", c).endswith(f"AllowAccounts=llm,{HEALTH_ACCOUNT}")
    state = parse(desired_document(c, "slurm").document())  # the reconcile reads it as it would in the cluster
    assert state.users["slurm"].default_account == HEALTH_ACCOUNT
    assert state.accounts[HEALTH_ACCOUNT].parent == "root"
    # No active checks, or no accounts at all (no associations enforced): nothing added.
    assert HEALTH_ACCOUNT not in desired_document(config("prod"), "slurm").accounts
    assert "AllowAccounts" not in partition_conf("trainium", config("prod", ("partitions.trainium.accounts", [])))
