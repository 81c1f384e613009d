"""`slurm-eks job status` stays readable in an 80-column terminal; `--wide` shows every column.

The jobs come from a fake backend handed to the CLI through `client.select_backend`: no Slurm runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scripts.cli import slurm as slurm_cli
from scripts.cli.main import app
from slurm.backend import SubmitOptions
from slurm.jobinfo import JobInfo

NOW = datetime.now(UTC)


def job(job_id: int, name: str, state: str, **overrides: object) -> JobInfo:
    fields: dict[str, object] = {
        "job_id": job_id,
        "name": name,
        "user": "alice",
        "state": state,
        "reason": None,
        "partition": "gpu-h100",
        "nodes": "gpu-h100-[0-3]",
        "exit_code": None,
        "exit_signal": None,
        "restart_count": 0,
        "submit_time": NOW - timedelta(hours=3),
        "start_time": None,
        "end_time": None,
        "stdout": "/shared/logs/train.out",
        "work_dir": "/shared/home/alice",
        "source": "squeue",
    }
    return JobInfo(**{**fields, **overrides})  # type: ignore[arg-type]


JOBS = [
    job(101, "train-llama-8b", "COMPLETED", exit_code=0, start_time=NOW - timedelta(hours=2, minutes=30),
        end_time=NOW - timedelta(minutes=30)),
    job(102, "eval-checkpoint", "RUNNING", restart_count=1, start_time=NOW - timedelta(minutes=5, seconds=7)),
    job(103, "sweep-lr-0.0003", "PENDING", reason="Resources", nodes=None),
    job(104, "preprocess-shards", "FAILED", exit_code=1, exit_signal=9, start_time=NOW - timedelta(hours=1),
        end_time=NOW - timedelta(minutes=59)),
]


class FakeBackend:
    name = "fake"

    def submit(self, script: Path, options: SubmitOptions) -> int:
        raise AssertionError("job status must not submit")

    def queue(self) -> list[JobInfo]:
        return list(JOBS)

    def accounting(self, job_ids: Iterable[int]) -> list[JobInfo]:
        return [j for j in JOBS if j.job_id in set(job_ids)]

    def cancel(self, job_id: int) -> None:
        raise AssertionError

    def requeue(self, job_id: int) -> None:
        raise AssertionError


@pytest.fixture(autouse=True)
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_cli.client, "select_backend", lambda name=None: FakeBackend())


def status(*args: str, columns: int = 80) -> str:
    result = CliRunner().invoke(app, ["job", "status", *args], env={"COLUMNS": str(columns), "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.output


def test_status_at_80_columns_shows_whole_states_and_names() -> None:
    output = status()
    assert "…" not in output, output
    assert max(len(line) for line in output.splitlines()) <= 80, output
    for word in ("COMPLETED", "RUNNING", "PENDING", "FAILED", "Resources", "STATE", "NAME", "PARTITION"):
        assert word in output, output
    for j in JOBS:
        assert str(j.job_id) in output and j.name in output, output
    assert "2:00:00" in output  # elapsed of the finished job
    running = next(line for line in output.splitlines() if "eval-checkpoint" in line)
    assert re.search(r" 0:[0-5]\d:\d\d ", running), running  # elapsed of the running job, counting from 0:05:07
    assert "1 (signal 9)" in output
    assert "SUBMIT" not in output and "USER" not in output


def test_one_job_at_80_columns() -> None:
    output = status("103")
    assert "sweep-lr-0.0003" in output and "PENDING" in output and "Resources" in output
    assert "train-llama-8b" not in output


def test_wide_shows_every_column() -> None:
    output = status("--wide", columns=250)
    for header in ("ID", "NAME", "USER", "STATE", "REASON", "PARTITION", "NODES", "EXIT", "RESTARTS", "SUBMIT",
                   "START", "END", "ELAPSED"):
        assert header in output, output
    assert "alice" in output and "gpu-h100-[0-3]" in output
