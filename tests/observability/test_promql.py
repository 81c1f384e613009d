"""The tokenizer the name checks rely on: it finds names wherever PromQL puts them and skips everything else."""

from __future__ import annotations

import pytest

from tests.observability.promql import PromQLError, grafana_query_names, metric_names


@pytest.mark.parametrize(("expr", "names"), [
    ('sum by (partition) (increase(a_total{check="x", y=~"z.*"}[1h])) > 3', {"a_total"}),
    ("sum(a) by (le) / ignoring(instance) group_left(node) b offset 1h30m > bool 1e3", {"a", "b"}),
    ("time() - max(c_seconds) > 600", {"c_seconds"}),
    ("absent(a) or absent(b) unless on (partition) d", {"a", "b", "d"}),
    ('rate(a{instance=~"$node"}[$__rate_interval]) * on() group_right ${x} c', {"a", "c"}),
    ('label_replace(a, "dst", "$1 by (x)", "src", "(.*)")', {"a"}),
    ("max_over_time(a[5m:1m]) and (b != 4)", {"a", "b"}),
    ("count without (gpu) (DCGM_FI_DEV_GPU_UTIL{hpc_job!=''})", {"DCGM_FI_DEV_GPU_UTIL"}),
    ("a:recorded:rate5m + 0x1F", {"a:recorded:rate5m"}),
])
def test_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


@pytest.mark.parametrize("expr", ["ratee(a[5m])", "sum(a", "a{x=\"1\"", "summ by (x) (a)"])
def test_rejects(expr: str) -> None:
    with pytest.raises(PromQLError):
        metric_names(expr)


def test_grafana_label_values() -> None:
    assert grafana_query_names("label_values(slurm_partition_jobs, partition)") == {"slurm_partition_jobs"}
    assert grafana_query_names('label_values(a{x="y"}, hpc_job)') == {"a"}
    assert grafana_query_names("label_values(partition)") == set()
