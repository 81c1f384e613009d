"""`storage.checkpointStore` and `partitions.<name>.checkpointStore`: the checkpoint manager every rendered job
runs (jobs/checkpoint_store): each job's newest complete checkpoints copied to S3 every `intervalSeconds`, the
newest `keep` kept there, and a job whose directory on /shared has none resumes from S3. A partition may change the
interval and the count; `slurm-eks job render` may change them per job. Without Pulumi, so the job tooling reads it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from components.config.base import Model

# Where the NodeSet pods mount the jobs' AWS identity for the store (components/slinky/job_aws.py builds the
# volumes), read by the job scripts (jobs/templates/checkpoint_sync.sh): one definition for both sides.
JOB_ENV_CONFIG_MAP = "slurm-eks-job-aws"  # holds job.env
JOB_ENV_DIR = "/etc/slurm-eks-jobs"  # not under /etc/slurm-eks: the health settings ConfigMap is mounted there
JOB_ENV_FILE = f"{JOB_ENV_DIR}/job.env"
TOKEN_DIR = "/var/run/secrets/slurm-eks/aws"
TOKEN_FILE = f"{TOKEN_DIR}/token"


STORE_KEY = "SLURM_EKS_CHECKPOINT_STORE"  # job.env's line naming the store


def job_env_value(job_env: str, key: str) -> str | None:
    """One variable of a job.env (NAME=value lines), None when absent or empty."""
    for line in job_env.splitlines():
        name, _, value = line.partition("=")
        if name == key and value:
            return value
    return None


class CheckpointStore(Model):
    """Where and how often: `s3` is `s3://bucket/prefix` (each user's jobs under `<prefix>/<user>/<job>/`)."""

    s3: str
    interval_seconds: int = Field(300, ge=30, le=86_400)
    keep: int = Field(3, ge=1, le=100)
    # zstd where a sample of the file shrinks by 10% or more (jobs/checkpoint_store/codec.py); off: as they are
    compression: Literal["zstd", "off"] = "zstd"


class CheckpointStoreOverride(Model):
    """A partition's own cadence (its jobs' checkpoints are bigger, or its nodes are preempted more often)."""

    interval_seconds: int | None = Field(None, ge=30, le=86_400)
    keep: int | None = Field(None, ge=1, le=100)
