"""What KEDA scales a partition's NodeSet to (components/lifecycle/autoscaling.py nodes_needed_query): busy nodes
plus the nodes of the pending jobs that could start (our exporter's series, one name shared with slurm/health through
components/observability/metric_catalog.py), and Slurm's own pending count only while that series is absent."""

from __future__ import annotations

import re

from components.lifecycle.autoscaling import nodes_needed_query
from components.observability.metric_catalog import ALL_NAMES, PARTITION_NODES_WANTED, SLURM_EKS
from slurm.agent import contract as metric_names
from tests.observability.promql import metric_names as names_in


class Value:
    """An instant vector of one sample; None stands for the empty vector (PromQL: `x + empty` is empty)."""

    def __init__(self, n: float) -> None:
        self.n = n

    def __add__(self, other: Value | None) -> Value | None:
        return None if other is None else Value(self.n + other.n)

    __radd__ = __add__

    def __sub__(self, other: Value | float | None) -> Value | None:
        if other is None:
            return None
        return Value(self.n - (other.n if isinstance(other, Value) else other))


def evaluate(query: str, series: dict[str, float]) -> float | None:
    """The query over present `series` (absent: not in the dict), for the few PromQL forms it uses: sum of one
    partition's series, `or`, `+`, `- 1`, clamp_min and vector(0). PromQL's `or` takes the left side when it
    has a sample, like Python's `or` on an always-true Value."""
    python = re.sub(r'sum\(([a-z_]+)\{partition="[^"]*"\}\)', r'S("\1")', query).replace("vector(0)", "Value(0)")
    assert set(re.findall(r"[A-Za-z_]+(?=\()", python)) <= {"S", "Value", "clamp_min"}, python

    def clamp_min(v: Value | None, low: float) -> Value | None:
        return None if v is None else Value(max(v.n, low))

    result = eval(python, {"S": lambda name: Value(series[name]) if name in series else None,
                           "Value": Value, "clamp_min": clamp_min})
    return None if result is None else result.n


# 13 pending jobs, 5 of them held; the widest of all wants 8 nodes, the widest not held 4 (statistics.c).
SLURM = {"slurm_partition_nodes_alloc": 2, "slurm_partition_nodes_mixed": 1, "slurm_partition_jobs_pending": 13,
         "slurm_partition_jobs_hold": 5, "slurm_partition_jobs_min_job_nodes": 8,
         "slurm_partition_jobs_min_job_nodes_nohold": 4}


def test_one_name_for_the_exporter_and_the_query() -> None:
    query = nodes_needed_query("gpu-h100")
    assert names_in(query) <= ALL_NAMES and PARTITION_NODES_WANTED in names_in(query)
    assert metric_names.NODES_WANTED.name == PARTITION_NODES_WANTED and PARTITION_NODES_WANTED in SLURM_EKS.names
    assert metric_names.NODES_WANTED.labels == ("partition",)


def test_held_and_capped_jobs_keep_no_node_up() -> None:
    """13 pending jobs in Slurm's count, none of which could start: the busy nodes only. Slurm's count alone
    (the query before) asked for 3 + 13 + 7 = 23 nodes."""
    assert evaluate(nodes_needed_query("gpu-h100"), {**SLURM, PARTITION_NODES_WANTED: 0}) == 3
    assert evaluate(nodes_needed_query("gpu-h100"), {**SLURM, PARTITION_NODES_WANTED: 9}) == 12


def test_without_the_exporter_slurms_count_still_scales_without_held_jobs() -> None:
    """Slurm's own series: the 8 pending jobs not held and the widest of them (4 nodes, not the held 8)."""
    assert evaluate(nodes_needed_query("gpu-h100"), SLURM) == 3 + (13 - 5) + (4 - 1)
    everything_held = {**SLURM, "slurm_partition_jobs_hold": 13, "slurm_partition_jobs_min_job_nodes_nohold": 0}
    assert evaluate(nodes_needed_query("gpu-h100"), everything_held) == 3
    assert evaluate(nodes_needed_query("gpu-h100"), {}) == 0  # nothing scraped yet: no node
    assert evaluate(nodes_needed_query("gpu-h100"), {PARTITION_NODES_WANTED: 2}) == 2  # from zero
