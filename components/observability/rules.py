"""Alert rules, as the Prometheus rule groups kube-prometheus-stack turns into a PrometheusRule
(`additionalPrometheusRulesMap`, components/observability/stack.py). Every expression uses only names from
components/observability/metric_catalog.py (tests/observability check it). GPU and Trainium groups come only with the
partitions that have that hardware: a rule on a metric nobody exports would never fire, and hide that."""

from __future__ import annotations

from typing import Any

from components.config.cluster import ClusterConfig
from components.observability.nodes import has_accelerator

DRAINED_FOR = "10m"
REPLACEMENTS_PER_HOUR = 3  # more replacements of one partition and check in an hour: a repair loop
HELD_FOR = "30m"
CONTROLLER_STALE_SECONDS = 600
SLURM_ABSENT_FOR = "10m"

Rule = dict[str, Any]


def _alert(name: str, expr: str, for_: str | None, severity: str, summary: str) -> Rule:
    """One alerting rule; `for_` None fires at the first evaluation that matches."""
    return {"alert": name, "expr": expr, **({"for": for_} if for_ else {}), "labels": {"severity": severity},
            "annotations": {"summary": summary}}


def slurm_rules(config: ClusterConfig) -> list[Rule]:
    """Slurm 25.11 exports no per-job pending age (metric_catalog SLURM_*): a partition with pending jobs and no
    node allocated, mixed or idle for `health.pendingAlertAfter` means nodes are not coming (Karpenter capacity,
    quota, a stuck NodeSet)."""
    pending = "sum by (partition) (slurm_partition_jobs_pending) > 0"
    usable = ("sum by (partition) (slurm_partition_nodes_alloc + slurm_partition_nodes_mixed"
              " + slurm_partition_nodes_idle) > 0")
    return [
        _alert("SlurmNodesDrainedByCheck", "sum by (partition, check) (slurm_eks_nodes_drained) > 0", DRAINED_FOR,
               "warning", "{{ $value }} node(s) of {{ $labels.partition }} drained by check {{ $labels.check }}"),
        _alert("SlurmJobsPendingWithoutNodes", f"({pending}) unless on (partition) ({usable})",
               config.health.pending_alert_after, "warning",
               "{{ $labels.partition }} has pending jobs and no allocated, mixed or idle node"),
        _alert("SlurmControllerMetricsAbsent", "absent(slurm_partitions) or absent(slurm_nodes)", SLURM_ABSENT_FOR,
               "critical", "No metrics from slurmctld (autoscaling reads them too)"),
    ]


def repair_rules() -> list[Rule]:
    return [
        _alert("SlurmEksRepairLoop",
               f"sum by (partition, check) (increase(slurm_eks_repair_replacements_total[1h])) > "
               f"{REPLACEMENTS_PER_HOUR}", None, "critical",
               "{{ $labels.partition }}: more than " + str(REPLACEMENTS_PER_HOUR)
               + " replacements for {{ $labels.check }} in an hour"),
        _alert("SlurmEksRepairsHeld", "sum by (partition, why) (increase(slurm_eks_repair_held_total[15m])) > 0",
               HELD_FOR, "warning", "{{ $labels.partition }}: replacements held back ({{ $labels.why }})"),
        _alert("SlurmEksRepairControllerStale",
               f"time() - max(slurm_eks_repair_last_pass_timestamp_seconds) > {CONTROLLER_STALE_SECONDS}", None,
               "critical", "The repair controller has not finished a pass for over 10 minutes"),
    ]


def gpu_rules() -> list[Rule]:
    return [
        # The gauge holds the last XID seen: a change is a new XID (one repeated value is not seen again).
        _alert("GpuXidError", "changes(DCGM_FI_DEV_XID_ERRORS[10m]) > 0 and DCGM_FI_DEV_XID_ERRORS != 0", None,
               "warning", "XID {{ $value }} on {{ $labels.Hostname }} GPU {{ $labels.gpu }}"),
        _alert("GpuDoubleBitEcc", "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0", None, "critical",
               "Double-bit ECC errors on {{ $labels.Hostname }} GPU {{ $labels.gpu }}"),
        _alert("GpuRowRemapFailure", "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", None, "critical",
               "Row remapping failed on {{ $labels.Hostname }} GPU {{ $labels.gpu }}"),
    ]


def neuron_rules() -> list[Rule]:
    return [
        _alert("NeuronUncorrectedEcc",
               'increase(hardware_ecc_events_total{event_type=~".*_uncorrected"}[10m]) > 0', None, "critical",
               "Uncorrected ECC events on {{ $labels.instance_id }} device {{ $labels.neuron_device_index }}"),
    ]


def rule_groups(config: ClusterConfig) -> list[dict[str, Any]]:
    """The groups for this stack: Slurm and repair always, GPU and Trainium with their partitions."""
    groups = [{"name": "slurm-eks-slurm", "rules": slurm_rules(config)},
              {"name": "slurm-eks-repair", "rules": repair_rules()}]
    if has_accelerator(config, "nvidia"):
        groups.append({"name": "slurm-eks-gpu", "rules": gpu_rules()})
    if has_accelerator(config, "neuron"):
        groups.append({"name": "slurm-eks-neuron", "rules": neuron_rules()})
    return groups
