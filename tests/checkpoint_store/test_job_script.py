"""The rendered job script with the checkpoint manager, run by bash with real torchrun and jobs/train.py against
moto's S3 server (stand-ins for srun and scontrol: tests/render/standins.py): a preempted run's checkpoint reaches
S3 before the requeue; the job's directory on /shared is deleted; the requeued run restores from S3 and ends on
the parameters of an uninterrupted run."""

from __future__ import annotations

import getpass
import shutil
import sys
from pathlib import Path
from typing import Any

import boto3

from jobs.checkpoint_store.location import MANIFEST
from jobs.render import local_target, render_job, with_checkpoint_sync
from tests.checkpoint_store.conftest import BUCKET, REGION
from tests.jobs import runs
from tests.render.standins import job_sandbox, last_event, run_script

FLAGS = ["--steps", "24", "--checkpoint-every", "4", "--warmup-steps", "4"]
LOCAL = {"FAKE_NODE": "127.0.0.1", "SLURM_JOB_NODELIST": "127.0.0.1", "SLURM_NNODES": "1",
         "SLURM_JOB_NAME": "tiny", "SLURM_JOB_ID": "42"}  # fmt: skip


def stored(prefix: str) -> list[str]:
    listed = boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"].rsplit("/", 2)[1] for o in listed.get("Contents", []) if o["Key"].endswith(MANIFEST))


def test_a_job_that_lost_its_directory_resumes_from_s3_to_the_uninterrupted_parameters(
        tmp_path: Path, s3_server: dict[str, str]) -> None:  # fmt: skip
    reference = runs.torchrun(tmp_path / "reference", FLAGS, python=sys.executable, nproc=1, timeout=120)
    assert reference.rc == 0, reference.stderr[-3000:]

    sandbox = job_sandbox(tmp_path / "job")
    target = with_checkpoint_sync(sandbox.target(local_target(sandbox.shared, cpus=2, gpus=0)),
                                  s3=f"s3://{BUCKET}/ckpt", interval_seconds=30, keep=2)  # fmt: skip
    script = sandbox.root / "job.sbatch"
    script.write_text(render_job(target, [str(runs.TRAIN), *runs.TINY, *FLAGS]))
    env: dict[str, Any] = {**s3_server, **LOCAL, "PYTHONPATH": str(runs.REPO), "OMP_NUM_THREADS": "1"}

    stopped = run_script(sandbox, script, env, stop_after_step=9)
    assert stopped.returncode == 0 and "requeueing (restart 1 of 3)" in stopped.stdout, stopped.stderr[-3000:]
    stop_step = int(last_event(stopped.stdout, "preempted")["step"])
    # the preemption's own checkpoint went to S3 before the requeue (the last copy after training)
    user_prefix = f"ckpt/{getpass.getuser()}/"
    assert f"step-{stop_step}" in stored(user_prefix), stopped.stdout
    assert len(stored(user_prefix)) <= 2  # keep=2
    assert "slurm-eks ckpt: copied" in stopped.stdout

    shutil.rmtree(sandbox.checkpoints)  # /shared lost the job's directory
    resumed = run_script(sandbox, script, {**env, "SLURM_RESTART_COUNT": "1"})
    assert resumed.returncode == 0 and "training finished" in resumed.stdout, resumed.stderr[-3000:]
    assert f"slurm-eks ckpt: restored step-{stop_step}" in resumed.stdout
    assert int(last_event(resumed.stdout, "resumed")["step"]) == stop_step
    assert last_event(resumed.stdout, "done")["params_sha256"] == reference.last("done")["params_sha256"]
    assert "step-24" in stored(user_prefix)


def test_a_job_whose_store_cannot_be_read_does_not_start_over_it(tmp_path: Path, s3_server: dict[str, str]) -> None:
    sandbox = job_sandbox(tmp_path / "job")
    target = with_checkpoint_sync(sandbox.target(local_target(sandbox.shared, cpus=2, gpus=0)),
                                  s3="s3://no-such-bucket/ckpt")  # fmt: skip
    script = sandbox.root / "job.sbatch"
    script.write_text(render_job(target, [str(runs.TRAIN), *runs.TINY, *FLAGS]))
    result = run_script(sandbox, script, {**s3_server, **LOCAL, "PYTHONPATH": str(runs.REPO)})
    assert result.returncode == 1, result.stdout
    assert "NoSuchBucket" in result.stderr and "not starting over them from step 0" in result.stderr
    assert not (sandbox.checkpoints / "DONE").exists()
