"""Jobs on the real local Slurm (25.11, built from source), through slurm.client's CLI backend."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from slurm import client
from slurm.cli_backend import CliBackend
from slurm.jobinfo import JobInfo
from slurm.local.config import PARTITION

pytestmark = pytest.mark.slurm
BACKEND = CliBackend()


def submit(tmp_path: Path, body: str, *extra: str, **options: object) -> int:
    script = tmp_path / "job.sbatch"
    script.write_text(f"#!/bin/bash\nset -eu\n{body}\n")
    # The output path is always explicit: sbatch's default would write into the current directory.
    submit_options = client.SubmitOptions(output=str(tmp_path / "%x-%j.out"), extra_args=extra, **options)
    return client.submit(script, submit_options, BACKEND)


def wait_running(job_id: int) -> JobInfo:
    return client.wait_for(job_id, lambda job: job.state == "RUNNING", timeout_s=60, backend=BACKEND)


def wait_accounted(job_id: int, state: str, name: str) -> JobInfo:
    """sacct rows are filled in a moment after the job ends (state first, name and partition later)."""
    deadline = time.monotonic() + 30
    while True:
        records = BACKEND.accounting([job_id])
        complete = records and (records[0].state, records[0].name) == (state, name) and records[0].partition
        if complete or time.monotonic() > deadline:
            assert records, f"job {job_id} never reached accounting"
            return records[0]
        time.sleep(0.5)


def test_simple_job_completes_and_logs_are_returned(tmp_path: Path) -> None:
    started = time.monotonic()
    job_id = submit(tmp_path, 'echo "hello from $SLURM_JOB_ID on $SLURM_JOB_PARTITION"', job_name="hello")
    job = client.wait_for(job_id, timeout_s=60, backend=BACKEND)
    print(f"submit -> {job.state}: {time.monotonic() - started:.2f} s")
    assert (job.state, job.exit_code, job.name, job.partition) == ("COMPLETED", 0, "hello", PARTITION)
    assert job.stdout == str(tmp_path / f"hello-{job_id}.out")
    assert client.logs(job_id, BACKEND) == f"hello from {job_id} on {PARTITION}\n"


def test_finished_job_is_in_accounting(tmp_path: Path) -> None:
    job_id = submit(tmp_path, "exit 0", job_name="accounted")
    finished = client.wait_for(job_id, timeout_s=60, backend=BACKEND)
    record = wait_accounted(job_id, "COMPLETED", "accounted")
    assert (record.source, record.job_id, record.name, record.state) == ("sacct", job_id, "accounted", "COMPLETED")
    assert (record.partition, record.nodes, record.restart_count) == (PARTITION, finished.nodes, 0)
    assert record.start_time is not None and record.end_time is not None


def test_cancelled_job_ends_cancelled(tmp_path: Path) -> None:
    job_id = submit(tmp_path, "sleep 300", job_name="long")
    wait_running(job_id)
    client.cancel(job_id, BACKEND)
    job = client.wait_for(job_id, timeout_s=60, backend=BACKEND)
    assert job.state == "CANCELLED"
    assert wait_accounted(job_id, "CANCELLED", "long").state == "CANCELLED"


def test_gpus_per_node_sees_both_fake_gpus(tmp_path: Path) -> None:
    job_id = submit(tmp_path, 'echo "gpus=$CUDA_VISIBLE_DEVICES"', gpus_per_node=2, job_name="gpus")
    job = client.wait_for(job_id, timeout_s=60, backend=BACKEND)
    assert job.state == "COMPLETED"
    assert client.logs(job_id, BACKEND) == "gpus=0,1\n"


def test_requeued_job_restarts_and_counts_the_restart(tmp_path: Path) -> None:
    body = 'echo "run restart=${SLURM_RESTART_COUNT:-0}"\nif [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi'
    job_id = submit(tmp_path, body, "--requeue", "--open-mode=append", job_name="requeue")
    first_start = wait_running(job_id).start_time
    requeued_at = time.monotonic()
    client.requeue(job_id, BACKEND)
    restarted = client.wait_for(
        job_id,
        lambda job: job.state in ("RUNNING", "COMPLETED") and job.start_time > first_start,
        timeout_s=90,
        poll_s=0.2,
        backend=BACKEND,
    )
    delay = time.monotonic() - requeued_at
    print(f"requeue -> running again: {delay:.1f} s")
    assert delay < 60, "AuthInfo=cred_expire should make a requeued job restart well before Slurm's 120 s default"
    job = client.wait_for(job_id, timeout_s=60, backend=BACKEND)
    assert (job.state, job.restart_count) == ("COMPLETED", 1), restarted
    runs = [line for line in client.logs(job_id, BACKEND).splitlines() if line.startswith("run ")]
    assert runs == ["run restart=0", "run restart=1"]  # --open-mode=append kept the first run's output
    assert wait_accounted(job_id, "COMPLETED", "requeue").restart_count == 1


def test_bad_submission_gives_slurms_reason(tmp_path: Path) -> None:
    with pytest.raises(client.JobClientError, match="invalid partition"):
        submit(tmp_path, "true", partition="no-such-partition")
