"""What every job backend (sbatch/squeue CLI, pyslurm) offers, and the submit options they share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from slurm.jobinfo import JobInfo


class JobClientError(RuntimeError):
    """A job operation failed; the message says why (Slurm's own words where it gave any)."""


@dataclass(frozen=True)
class SubmitOptions:
    """sbatch options given on the command line; they override the script's #SBATCH lines."""

    partition: str | None = None
    nodes: int | None = None
    time: str | None = None
    gpus_per_node: int | None = None
    job_name: str | None = None
    output: str | None = None
    # Passed verbatim to sbatch (CLI backend only), e.g. ("--requeue", "--export=ALL,STEPS=10").
    extra_args: tuple[str, ...] = ()

    def sbatch_args(self) -> list[str]:
        named = {
            "--partition": self.partition,
            "--nodes": self.nodes,
            "--time": self.time,
            "--gpus-per-node": self.gpus_per_node,
            "--job-name": self.job_name,
            "--output": self.output,
        }
        return [f"{flag}={value}" for flag, value in named.items() if value is not None] + list(self.extra_args)


class JobBackend(Protocol):
    name: str

    def submit(self, script: Path, options: SubmitOptions) -> int: ...

    def queue(self) -> list[JobInfo]:
        """Jobs slurmctld holds: pending, running and recently finished (MinJobAge)."""
        ...

    def accounting(self, job_ids: Iterable[int]) -> list[JobInfo]:
        """Jobs from slurmdbd, one per id, with requeues counted."""
        ...

    def cancel(self, job_id: int) -> None: ...

    def requeue(self, job_id: int) -> None: ...
