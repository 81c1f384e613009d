"""pyslurm 25.11 objects <-> this package's types, without importing pyslurm (so it is testable anywhere).

Attribute names follow pyslurm 25.11: `pyslurm.Job` (slurmctld's view), `pyslurm.db.Job` (accounting) and
`pyslurm.JobSubmitDescription`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from slurm.backend import JobClientError, SubmitOptions
from slurm.jobinfo import TERMINAL_STATES, JobInfo, expand_output_path, state_name


def _time(seconds: int | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


def submit_attributes(options: SubmitOptions) -> dict[str, Any]:
    """SubmitOptions as `pyslurm.JobSubmitDescription` attributes (GPUs per node go in gres_per_node)."""
    if options.extra_args:
        raise JobClientError(
            f"the pyslurm backend cannot pass raw sbatch options {' '.join(options.extra_args)}; "
            "put them in the script as #SBATCH lines or use SLURM_EKS_JOB_BACKEND=cli"
        )
    named = {
        "partitions": options.partition,
        "nodes": options.nodes,
        "time_limit": options.time,
        "gres_per_node": f"gpu:{options.gpus_per_node}" if options.gpus_per_node is not None else None,
        "name": options.job_name,
        "standard_output": options.output,
    }
    return {key: value for key, value in named.items() if value is not None}


def from_job(job: Any) -> JobInfo:
    """A `pyslurm.Job` (slurmctld's view) as JobInfo."""
    state = state_name(job.state)
    finished = state in TERMINAL_STATES
    return JobInfo(
        job_id=int(job.id),
        name=job.name or "",
        user=job.user_name,
        state=state,
        reason=job.state_reason if job.state_reason not in (None, "None") else None,
        partition=job.partition,
        nodes=job.allocated_nodes,
        exit_code=job.exit_code if finished else None,
        exit_signal=(job.exit_code_signal or None) if finished else None,
        restart_count=job.requeue_count or 0,
        submit_time=_time(job.submit_time),
        start_time=_time(job.start_time),
        end_time=_time(job.end_time) if finished else None,
        stdout=expand_output_path(
            job.standard_output,
            job_id=int(job.id),
            name=job.name or "",
            user=job.user_name,
            nodes=job.allocated_nodes,
            work_dir=job.working_directory,
        ),
        work_dir=job.working_directory,
        source="pyslurm",
    )


def from_db_job(job: Any) -> JobInfo:
    """A `pyslurm.db.Job` (accounting record) as JobInfo.

    `pyslurm.db.Jobs` is keyed by job id, so a requeued job's earlier records are not visible here
    (restart count 0); slurmctld's view (`from_job`) has the real count while the job is known to it.
    """
    return JobInfo(
        job_id=int(job.id),
        name=job.name or "",
        user=job.user_name,
        state=state_name(job.state),
        reason=job.state_reason if job.state_reason not in (None, "None") else None,
        partition=job.partition,
        nodes=job.nodelist,
        exit_code=job.exit_code,
        exit_signal=job.exit_code_signal or None,
        restart_count=0,
        submit_time=_time(job.submit_time),
        start_time=_time(job.start_time),
        end_time=_time(job.end_time),
        stdout=None,
        work_dir=job.working_directory,
        source="pyslurm-db",
    )
