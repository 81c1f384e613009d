"""Submit, inspect, cancel and read Slurm jobs, through pyslurm where it imports, else the CLI tools.

Nothing here imports pulumi: this runs on the cluster's login pod.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from slurm.backend import JobBackend, JobClientError, SubmitOptions
from slurm.cli_backend import CliBackend
from slurm.jobinfo import JobInfo

BACKEND_ENV = "SLURM_EKS_JOB_BACKEND"
BACKENDS = ("auto", "cli", "pyslurm")

__all__ = [
    "BACKENDS",
    "JobClientError",
    "JobInfo",
    "SubmitOptions",
    "cancel",
    "follow_logs",
    "list_jobs",
    "logs",
    "requeue",
    "select_backend",
    "status",
    "submit",
    "wait_for",
]


def select_backend(name: str | None = None) -> JobBackend:
    """`name`, else $SLURM_EKS_JOB_BACKEND, else auto: pyslurm when it imports, the CLI otherwise."""
    choice = (name or os.environ.get(BACKEND_ENV) or "auto").lower()
    if choice not in BACKENDS:
        raise JobClientError(f"unknown job backend {choice!r}; choose one of {', '.join(BACKENDS)}")
    if choice == "cli":
        return CliBackend()
    try:
        from slurm.pyslurm_backend import PyslurmBackend
    except ImportError as exc:
        if choice == "pyslurm":
            raise JobClientError(f"pyslurm is not importable here ({exc}); it needs Slurm 25.11") from exc
        return CliBackend()
    return PyslurmBackend()


def submit(script: Path, options: SubmitOptions | None = None, backend: JobBackend | None = None) -> int:
    if not script.is_file():
        raise JobClientError(f"job script {script} does not exist")
    return (backend or select_backend()).submit(script.resolve(), options or SubmitOptions())


def list_jobs(backend: JobBackend | None = None) -> list[JobInfo]:
    """Jobs slurmctld knows now (pending, running, finished within MinJobAge), by id."""
    return sorted((backend or select_backend()).queue(), key=lambda job: job.job_id)


def status(job_id: int, backend: JobBackend | None = None) -> JobInfo:
    """slurmctld's view while it has the job (live state, restart count, stdout), else accounting's."""
    backend = backend or select_backend()
    for job in backend.queue():
        if job.job_id == job_id:
            return job
    for job in backend.accounting([job_id]):
        if job.job_id == job_id:
            return job
    raise JobClientError(f"job {job_id} is unknown to slurmctld and to accounting")


def cancel(job_id: int, backend: JobBackend | None = None) -> None:
    (backend or select_backend()).cancel(job_id)


def requeue(job_id: int, backend: JobBackend | None = None) -> None:
    (backend or select_backend()).requeue(job_id)


def wait_for(
    job_id: int,
    condition: Callable[[JobInfo], bool] = lambda job: job.finished,
    timeout_s: float = 300.0,
    poll_s: float = 0.5,
    backend: JobBackend | None = None,
) -> JobInfo:
    """Poll until `condition(job)` (default: the job finished); JobClientError on timeout."""
    backend = backend or select_backend()
    deadline = time.monotonic() + timeout_s
    while True:
        job = status(job_id, backend)
        if condition(job):
            return job
        if time.monotonic() >= deadline:
            raise JobClientError(f"job {job_id} still {job.state} after {timeout_s:.0f} s")
        time.sleep(poll_s)


def _stdout_path(job: JobInfo) -> Path:
    if job.stdout is None:
        raise JobClientError(f"the output path of job {job.job_id} is not known (it left slurmctld's memory)")
    return Path(job.stdout)


def logs(job_id: int, backend: JobBackend | None = None) -> str:
    """The job's stdout file as it is now."""
    job = status(job_id, backend)
    path = _stdout_path(job)
    if not path.exists():
        if job.start_time is None:
            raise JobClientError(f"job {job_id} has not started yet ({job.state}); no output so far")
        raise JobClientError(f"output file {path} of job {job_id} does not exist on this machine")
    return path.read_text(errors="replace")


def follow_logs(job_id: int, poll_s: float = 1.0, backend: JobBackend | None = None) -> Iterator[str]:
    """Yield the job's stdout as it grows, until the job has finished and everything was read."""
    backend = backend or select_backend()
    offset = 0
    while True:
        job = status(job_id, backend)
        path = _stdout_path(job)
        if path.exists():
            with path.open("r", errors="replace") as stream:
                stream.seek(offset)
                chunk = stream.read()
                offset = stream.tell()
            if chunk:
                yield chunk
        if job.finished:
            return
        time.sleep(poll_s)
