"""Backend selection, submit options and the pyslurm 25.11 conversions (pyslurm itself is not needed)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from slurm import client
from slurm.backend import SubmitOptions
from slurm.cli_backend import CliBackend, parse_parsable
from slurm.pyslurm_convert import from_db_job, from_job, submit_attributes

REPO = Path(__file__).resolve().parents[2]


def pyslurm_job(**overrides: object) -> SimpleNamespace:
    """The pyslurm.Job attributes the conversion reads (names as in pyslurm 25.11)."""
    attributes = {
        "id": 7,
        "name": "train",
        "user_name": "alice",
        "state": "COMPLETED",
        "state_reason": "None",
        "partition": "gpu-h100",
        "allocated_nodes": "gpu-h100-[0-1]",
        "exit_code": 0,
        "exit_code_signal": 0,
        "requeue_count": 2,
        "submit_time": 1767225600,
        "start_time": 1767225610,
        "end_time": 1767229210,
        "standard_output": "/shared/logs/%x-%j.out",
        "working_directory": "/shared/home/alice",
    }
    return SimpleNamespace(**{**attributes, **overrides})


def test_sbatch_args_and_parsable_output() -> None:
    options = SubmitOptions(partition="cpu", nodes=2, gpus_per_node=8, time="1:00:00", extra_args=("--requeue",))
    assert options.sbatch_args() == ["--partition=cpu", "--nodes=2", "--time=1:00:00", "--gpus-per-node=8", "--requeue"]
    assert parse_parsable("42\n") == 42
    assert parse_parsable("42;prod\n") == 42
    with pytest.raises(client.JobClientError):
        parse_parsable("sbatch: error: something\n")


def test_backend_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(client.BACKEND_ENV, raising=False)
    assert isinstance(client.select_backend("cli"), CliBackend)
    with pytest.raises(client.JobClientError, match="unknown job backend"):
        client.select_backend("slurmrestd")
    monkeypatch.setenv(client.BACKEND_ENV, "cli")
    assert isinstance(client.select_backend(), CliBackend)
    try:
        import pyslurm  # noqa: F401
    except ImportError:
        monkeypatch.delenv(client.BACKEND_ENV)
        assert isinstance(client.select_backend(), CliBackend)  # auto falls back to the CLI
        with pytest.raises(client.JobClientError, match="pyslurm is not importable"):
            client.select_backend("pyslurm")


def test_pyslurm_submit_attributes() -> None:
    attributes = submit_attributes(SubmitOptions(partition="gpu-h100", nodes=4, gpus_per_node=8, time="2:00:00"))
    assert attributes == {"partitions": "gpu-h100", "nodes": 4, "time_limit": "2:00:00", "gres_per_node": "gpu:8"}
    with pytest.raises(client.JobClientError, match="raw sbatch options"):
        submit_attributes(SubmitOptions(extra_args=("--requeue",)))


def test_pyslurm_job_conversion() -> None:
    job = from_job(pyslurm_job())
    assert (job.job_id, job.state, job.restart_count, job.nodes, job.exit_code) == (
        7,
        "COMPLETED",
        2,
        "gpu-h100-[0-1]",
        0,
    )
    assert job.stdout == "/shared/logs/train-7.out"
    assert job.end_time == datetime.fromtimestamp(1767229210, UTC)
    running = from_job(pyslurm_job(state="RUNNING", exit_code=0))
    assert (running.finished, running.exit_code, running.end_time) == (False, None, None)


def test_pyslurm_db_job_conversion() -> None:
    record = SimpleNamespace(
        id=7,
        name="train",
        user_name="alice",
        state="FAILED",
        state_reason="NonZeroExitCode",
        partition="gpu-h100",
        nodelist="gpu-h100-0",
        exit_code=3,
        exit_code_signal=0,
        submit_time=1767225600,
        start_time=1767225610,
        end_time=1767225700,
        working_directory="/shared/home/alice",
    )
    job = from_db_job(record)
    assert (job.state, job.exit_code, job.exit_signal, job.reason, job.source) == (
        "FAILED",
        3,
        None,
        "NonZeroExitCode",
        "pyslurm-db",
    )


class OneJobBackend:
    """A backend whose only job walks through `states`, one per status poll, writing to `stdout`."""

    name = "fake"

    def __init__(self, stdout: Path, states: list[str]) -> None:
        self.stdout, self.states = stdout, states

    def queue(self) -> list:
        if not self.states:
            raise AssertionError("polled again after the job had ended")
        state = self.states.pop(0)
        self.stdout.write_text(self.stdout.read_text() + f"{state}\n")
        return [from_job(pyslurm_job(state=state, standard_output=str(self.stdout)))]

    def accounting(self, job_ids: object) -> list:
        return []


@pytest.mark.parametrize("end", ["COMPLETED", "OUT_OF_MEMORY", "TIMEOUT"])
def test_follow_logs_stops_when_the_job_ends(tmp_path: Path, end: str) -> None:
    stdout = tmp_path / "out"
    stdout.write_text("")
    chunks = client.follow_logs(7, poll_s=0, backend=OneJobBackend(stdout, ["RUNNING", end]))  # type: ignore[arg-type]
    # A state missing from TERMINAL_STATES would poll on forever (`job logs -f` never returns).
    assert "".join(chunks) == f"RUNNING\n{end}\n"


def test_slurm_package_never_imports_pulumi() -> None:
    """The client runs on the login pod, where pulumi is not installed."""
    code = (
        "import sys; sys.modules['pulumi'] = None\n"
        "import slurm.client, slurm.jobinfo, slurm.local, slurm.pyslurm_convert, scripts.cli.slurm\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
