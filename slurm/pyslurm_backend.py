"""Job backend on pyslurm 25.11 (the login pod, where libslurm 25.11 is installed); kept thin.

Importing this module fails with ImportError where pyslurm is missing; `slurm.client` then uses the CLI.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyslurm

from slurm.backend import JobClientError, SubmitOptions
from slurm.jobinfo import JobInfo
from slurm.pyslurm_convert import from_db_job, from_job, submit_attributes


class PyslurmBackend:
    name = "pyslurm"

    def submit(self, script: Path, options: SubmitOptions) -> int:
        description = pyslurm.JobSubmitDescription(script=str(script), **submit_attributes(options))
        # JobSubmitDescription ignores #SBATCH lines unless asked; explicit options keep precedence.
        description.load_sbatch_options(overwrite=False)
        try:
            return int(description.submit())
        except pyslurm.RPCError as exc:
            raise JobClientError(f"submit failed: {exc}") from exc

    def queue(self) -> list[JobInfo]:
        return [from_job(job) for job in pyslurm.Jobs.load().values()]

    def accounting(self, job_ids: Iterable[int]) -> list[JobInfo]:
        ids = list(job_ids)
        if not ids:
            return []
        jobs = pyslurm.db.Jobs.load(pyslurm.db.JobFilter(ids=ids))
        return [from_db_job(job) for job in jobs.values()]

    def cancel(self, job_id: int) -> None:
        try:
            pyslurm.Job(job_id).cancel()
        except pyslurm.RPCError as exc:
            raise JobClientError(f"cancel {job_id} failed: {exc}") from exc

    def requeue(self, job_id: int) -> None:
        try:
            pyslurm.Job(job_id).requeue()
        except pyslurm.RPCError as exc:
            raise JobClientError(f"requeue {job_id} failed: {exc}") from exc
