"""Every dashboard loads, names itself, queries the Prometheus data source, and uses only documented metrics
(components/observability/metric_catalog.py); broken copies show each check firing."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.observability.stack import dashboard_files
from tests.observability.checks import dashboard_problems, panels

EXPECTED = {"cluster.json", "jobs.json", "node-health.json", "efa.json", "fsx.json"}


def _load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(dashboard_files()[name].read_text())
    return doc


def test_the_dashboards_are_there_with_distinct_uids() -> None:
    assert set(dashboard_files()) == EXPECTED
    uids = [_load(name)["uid"] for name in EXPECTED]
    assert len(set(uids)) == len(uids)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_is_valid_and_uses_documented_metrics(name: str) -> None:
    doc = _load(name)
    assert list(panels(doc)), name
    assert dashboard_problems(doc) == []


def test_a_misspelt_metric_fails() -> None:
    doc = copy.deepcopy(_load("cluster.json"))
    target = doc["panels"][0]["targets"][0]
    target["expr"] = target["expr"].replace("slurm_partition_jobs_pending", "slurm_partition_job_pending")
    assert dashboard_problems(doc) == [
        f"panel {doc['panels'][0]['title']!r}: undocumented metric slurm_partition_job_pending in {target['expr']!r}"]


def test_a_misspelt_metric_in_a_variable_fails() -> None:
    doc = copy.deepcopy(_load("jobs.json"))
    doc["templating"]["list"][0]["query"]["query"] = "label_values(DCGM_FI_DEV_GPU_UTILISATION, hpc_job)"
    assert [p for p in dashboard_problems(doc) if "DCGM_FI_DEV_GPU_UTILISATION" in p]


def test_a_panel_without_datasource_or_targets_fails() -> None:
    doc = copy.deepcopy(_load("efa.json"))
    del doc["panels"][0]["datasource"]
    doc["panels"][1]["targets"] = []
    del doc["uid"]
    problems = dashboard_problems(doc)
    assert "no uid" in problems
    assert any("datasource" in p for p in problems) and any("no targets" in p for p in problems)


def test_an_unknown_function_fails() -> None:
    doc = copy.deepcopy(_load("node-health.json"))
    doc["panels"][0]["targets"][0]["expr"] = "summ(slurm_eks_nodes_drained)"
    assert any("unknown function summ()" in p for p in dashboard_problems(doc))


def test_a_misspelt_fsx_metric_fails() -> None:
    doc = copy.deepcopy(_load("fsx.json"))
    doc["panels"][0]["targets"][0]["metricName"] = "DataReadByte"
    assert dashboard_problems(doc) == ["panel 'Throughput': target A: undocumented AWS/FSx metric 'DataReadByte'"]


def test_a_cloudwatch_target_on_another_namespace_fails() -> None:
    doc = copy.deepcopy(_load("fsx.json"))
    target = doc["panels"][2]["targets"][0]
    target["namespace"], target["metricName"], target["dimensions"] = "AWS/EFS", "StorageBytes", {"FileSystemId": "x"}
    assert dashboard_problems(doc) == ["panel 'Free capacity': target A: namespace 'AWS/EFS' is not AWS/FSx",
                                       "panel 'Free capacity': target A: undocumented AWS/FSx metric 'StorageBytes'"]


def test_a_cloudwatch_target_on_another_data_source_or_dimension_fails() -> None:
    doc = copy.deepcopy(_load("fsx.json"))
    doc["panels"][2]["targets"][0]["datasource"]["uid"] = "prometheus"
    doc["panels"][2]["targets"][0]["dimensions"] = {"VolumeId": "$filesystem"}
    assert dashboard_problems(doc) == [
        "panel 'Free capacity': target A: datasource is not the CloudWatch one",
        "panel 'Free capacity': target A: dimensions ['VolumeId'] are not ['FileSystemId']"]


def test_a_math_expression_on_an_unknown_id_and_a_misspelt_variable_metric_fail() -> None:
    doc = copy.deepcopy(_load("fsx.json"))
    doc["panels"][0]["targets"][2]["expression"] = "reed/PERIOD(reed)"
    doc["templating"]["list"][0]["query"]["metricName"] = "DataReadBites"
    assert dashboard_problems(doc) == [
        "panel 'Throughput': target C: 'reed/PERIOD(reed)' uses 'reed', no metric of this panel",
        "variable filesystem: undocumented AWS/FSx metric 'DataReadBites'"]
