"""The ScaledObject's query run by Prometheus's own engine (`promtool test rules`, Debian's prometheus package):
the same series Slurm 25.11 exports for a partition with held jobs, with and without the lifecycle controller's
demand series. The hand evaluator of test_autoscaling_query.py reads the query's shape; this runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from components.lifecycle.autoscaling import nodes_needed_query
from components.observability.metric_catalog import PARTITION_NODES_WANTED
from tests.conftest import require_tool

PARTITION = "gpu-h100"
# 2 busy nodes; 13 pending jobs, 5 held (WAIT_HELD_USER); the widest of all wants 8 nodes, the widest not held 4.
SLURM = {"slurm_partition_nodes_alloc": 2, "slurm_partition_nodes_mixed": 0, "slurm_partition_jobs_pending": 13,
         "slurm_partition_jobs_hold": 5, "slurm_partition_jobs_min_job_nodes": 8,
         "slurm_partition_jobs_min_job_nodes_nohold": 4}


def run_query(tmp_path: Path, series: dict[str, float], expected: float) -> subprocess.CompletedProcess[str]:
    """`promtool test rules` of one recording rule (the query) over `series`, expecting `expected`."""
    promtool = require_tool("promtool", "make test installs it: apt-get install prometheus")
    rules = tmp_path / "rules.yml"
    rules.write_text(json.dumps({"groups": [{"name": "keda", "rules": [
        {"record": "nodes_needed", "expr": nodes_needed_query(PARTITION)}]}]}))
    test = tmp_path / "test.yml"
    test.write_text(json.dumps({
        "rule_files": [rules.name], "evaluation_interval": "1m",
        "tests": [{"interval": "1m",
                   "input_series": [{"series": f'{name}{{partition="{PARTITION}"}}', "values": f"{value:g}x2"}
                                    for name, value in series.items()],
                   "promql_expr_test": [{"expr": "nodes_needed", "eval_time": "1m",
                                         "exp_samples": [{"labels": "nodes_needed", "value": expected}]}]}]}))
    return subprocess.run([promtool, "test", "rules", test.name], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("series", "expected"), [
    # The lifecycle controller's series wins: busy nodes plus what could start.
    ({**SLURM, PARTITION_NODES_WANTED: 1}, 2 + 1),
    # Without it, Slurm's own series: the 8 jobs not held and the widest of them (4 nodes), never the held 8.
    (SLURM, 2 + 8 + 3),
    # Every pending job held: the busy nodes only.
    ({**SLURM, "slurm_partition_jobs_hold": 13, "slurm_partition_jobs_min_job_nodes_nohold": 0}, 2),
    # Nothing scraped yet.
    ({}, 0),
])
def test_prometheus_evaluates_the_query(tmp_path: Path, series: dict[str, float], expected: float) -> None:
    result = run_query(tmp_path, series, expected)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_fires_on_held_jobs_counted(tmp_path: Path) -> None:
    """The query before Slurm's `_nohold` series (held jobs counted: 2 + 13 + 7 = 22) fails this expectation."""
    result = run_query(tmp_path, SLURM, 2 + 13 + 7)
    assert result.returncode != 0 and "nodes_needed" in result.stdout + result.stderr
