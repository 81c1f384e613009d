"""`--format json` on the commands docs/cli-json.md lists beside the findings documents: diff, advise, job status and
local status give the documented fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scripts.cli import slurm as slurm_cli
from scripts.cli.main import app
from scripts.offline.plan import write_plan
from slurm.jobinfo import JobInfo
from slurm.local.cluster import ClusterStatus, DaemonStatus
from slurm.local.node import NodeState
from tests.cost.plans import group, plan, resource

runner = CliRunner(env={"COLUMNS": "200"})


def test_diff_json_lists_changes_and_the_cost_change(tmp_path: Path) -> None:
    def bucket(team: str) -> list:
        return [resource("aws:s3/bucket:Bucket", "data", tags={"team": team})]

    write_plan(plan("us-west-2", {"gpu-h100": group(["p5.48xlarge"], 0, 8)}, bucket("a")), tmp_path / "old")
    write_plan(plan("us-west-2", {"gpu-h100": group(["p5.48xlarge"], 0, 9)}, bucket("b")), tmp_path / "new")
    result = runner.invoke(app, ["diff", str(tmp_path / "old"), str(tmp_path / "new"), "--format", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["format"] == 1 and document["empty"] is False
    assert document["added"] == document["removed"] == []
    (changed,) = document["changed"]
    assert changed["type"] == "aws:s3/bucket:Bucket" and changed["name"] == "data"
    assert changed["properties"] == [{"path": "inputs.tags.team", "old": "a", "new": "b"}]
    assert document["cost"] == {"region": "us-west-2", "usd_per_hour_max": 55.04, "usd_per_hour_idle": 0.0}
    same = runner.invoke(app, ["diff", str(tmp_path / "old"), str(tmp_path / "old"), "--format", "json"])
    assert json.loads(same.output) == {"format": 1, "empty": True, "added": [], "removed": [], "changed": []}


def test_advise_format_json_is_the_json_answer() -> None:
    args = ["advise", "--stack", "dev", "--partition", "gpu", "--model", "llama3-1b"]
    by_format = json.loads(runner.invoke(app, [*args, "--format", "json"]).output)
    assert by_format == json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert by_format["recommended"]["command"].startswith("slurm-eks job render --stack dev --partition gpu")


def test_job_status_json(monkeypatch: pytest.MonkeyPatch) -> None:
    job = JobInfo(job_id=7, name="train", user="alice", state="RUNNING", reason=None, partition="gpu", nodes="n[1-2]",
                  exit_code=None, exit_signal=None, restart_count=1, submit_time=datetime(2026, 12, 4, 9, tzinfo=UTC),
                  start_time=None, end_time=None, stdout="/shared/logs/alice/train-7.out",
                  work_dir="/shared/home/alice", source="slurmctld")
    monkeypatch.setattr(slurm_cli.client, "select_backend", lambda name: None)
    monkeypatch.setattr(slurm_cli.client, "list_jobs", lambda backend: [job])
    document = json.loads(runner.invoke(app, ["job", "status", "--format", "json"]).output)
    assert document == {"format": 1, "jobs": [{
        "job_id": 7, "name": "train", "user": "alice", "state": "RUNNING", "reason": None, "partition": "gpu",
        "nodes": "n[1-2]", "exit_code": None, "exit_signal": None, "restart_count": 1,
        "submit_time": "2026-12-04T09:00:00+00:00", "start_time": None, "end_time": None,
        "stdout": "/shared/logs/alice/train-7.out", "work_dir": "/shared/home/alice", "source": "slurmctld",
        "finished": False}]}


def test_local_status_json_and_its_exit_status(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    down = ClusterStatus(tmp_path, (DaemonStatus("slurmctld", None, tmp_path / "slurmctld.log"),), None)
    monkeypatch.setattr(slurm_cli.local, "status", lambda: down)
    result = runner.invoke(app, ["local", "status", "--format", "json"])
    assert result.exit_code == 3
    assert json.loads(result.output) == {"format": 1, "up": False, "state_dir": str(tmp_path), "node": None,
                                         "daemons": [{"name": "slurmctld", "pid": None, "alive": False,
                                                      "log": str(tmp_path / "slurmctld.log")}]}
    up = ClusterStatus(tmp_path, (DaemonStatus("slurmctld", 42, tmp_path / "slurmctld.log"),),
                       NodeState("local", "IDLE", None))
    monkeypatch.setattr(slurm_cli.local, "status", lambda: up)
    result = runner.invoke(app, ["local", "status", "--format", "json"])
    assert result.exit_code == 0 and json.loads(result.output)["node"] == {
        "name": "local", "state": "IDLE", "reason": None, "usable": True}
