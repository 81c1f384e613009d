"""The alert rules: the ones asked for are there, use only documented metrics, and come with the partitions that
export them; and the kube-prometheus-stack values that carry them and turn Grafana on."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.aws.eks import SYSTEM_NODE_SELECTOR
from components.config.stackfile import load_stack
from components.observability.rules import rule_groups
from components.observability.stack import GRAFANA_ADMIN_SECRET, kube_prometheus_values
from components.slinky.state_storage import STATE_STORAGE_CLASS
from tests.observability.checks import rule_problems
from tests.slinky.helpers import config_of, trainium_only, variant


def _rules(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in groups for r in g["rules"]}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_rules_use_only_documented_metrics(stack: str) -> None:
    assert rule_problems(rule_groups(load_stack(stack)[0])) == []


def test_a_rule_on_an_unknown_metric_fails() -> None:
    groups = copy.deepcopy(rule_groups(load_stack("prod")[0]))
    groups[0]["rules"][0]["expr"] = "sum(slurm_eks_node_drained) > 0"
    assert rule_problems(groups) == [
        "SlurmNodesDrainedByCheck: undocumented metric slurm_eks_node_drained in 'sum(slurm_eks_node_drained) > 0'"]


def test_the_asked_for_alerts() -> None:
    rules = _rules(rule_groups(load_stack("prod")[0]))
    drained = rules["SlurmNodesDrainedByCheck"]
    assert "slurm_eks_nodes_drained" in drained["expr"] and drained["expr"].endswith("> 0") and drained["for"] == "10m"
    assert "slurm_partition_jobs_pending" in rules["SlurmJobsPendingWithoutNodes"]["expr"]
    assert "changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0" in rules["GpuXidError"]["expr"]
    assert "increase(slurm_eks_repair_replacements_total[1h])" in rules["SlurmEksRepairLoop"]["expr"]
    assert "slurm_eks_repair_held_total" in rules["SlurmEksRepairsHeld"]["expr"]
    assert rules["SlurmEksRepairControllerStale"]["expr"].startswith(
        "time() - max(slurm_eks_repair_last_pass_timestamp_seconds) > 600")
    assert "absent(slurm_partitions)" in rules["SlurmControllerMetricsAbsent"]["expr"]


def test_accelerator_rules_follow_the_partitions() -> None:
    assert {g["name"] for g in rule_groups(load_stack("prod")[0])} >= {"slurm-eks-gpu", "slurm-eks-neuron"}
    dev = {g["name"] for g in rule_groups(load_stack("dev")[0])}
    assert "slurm-eks-gpu" in dev and "slurm-eks-neuron" not in dev
    trn = {g["name"] for g in rule_groups(config_of(variant("prod", trainium_only)))}
    assert "slurm-eks-neuron" in trn and "slurm-eks-gpu" not in trn


def test_kube_prometheus_values() -> None:
    config = load_stack("prod")[0]
    values = kube_prometheus_values(config, "arn:aws:iam::123456789012:role/grafana")
    assert values["additionalPrometheusRulesMap"]["slurm-eks"]["groups"] == rule_groups(config)
    assert values["alertmanager"] == {"enabled": False}
    grafana = values["grafana"]
    assert grafana["enabled"] and grafana["nodeSelector"] == SYSTEM_NODE_SELECTOR
    assert grafana["admin"] == {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user",
                                "passwordKey": "admin-password"}
    assert grafana["persistence"]["storageClassName"] == STATE_STORAGE_CLASS and grafana["persistence"]["enabled"]
    assert (grafana["sidecar"]["dashboards"]["label"], grafana["sidecar"]["dashboards"]["labelValue"]) == (
        "grafana_dashboard", "1")
