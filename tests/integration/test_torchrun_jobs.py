"""Rendered torchrun jobs on the real local Slurm: train, checkpoint, preempt, requeue, resume, survive.

Every run trains the same model with the same flags, so every path (uninterrupted, resumed by a second
job, requeued after USR2, restarted after `kill -9`, resumed past a torn checkpoint) must end with the
parameter hash of a plain `torchrun --standalone` run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pytest

from jobs.render import local_target, render_job
from slurm import client
from slurm.cli_backend import CliBackend
from slurm.jobinfo import JobInfo
from slurm.local.config import FAKE_GPUS
from tests.conftest import require_module
from tests.jobs.runs import image_python
from tests.jobs.runs import log_events as events

require_module("torch", "the `jobs` extra: pip install -e '.[jobs]'")
pytestmark = [pytest.mark.slurm, pytest.mark.torch]

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "jobs" / "train.py"
ARGS = ["--steps", "160", "--checkpoint-every", "20", "--log-every", "1", "--seed", "7"]
BACKEND = CliBackend()
JOB_TIMEOUT_S = 240
# The default images' torchrun (torch 2.9.0, tests/jobs/runs.py IMAGE_VENV), not the main venv's.
TORCHRUN = Path(image_python()).parent / "torchrun"



def done_hash(text: str) -> str:
    (done,) = [e for e in events(text) if e.get("event") == "done"]
    return str(done["params_sha256"])


@pytest.fixture(scope="module")
def reference_hash(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same training as a plain, uninterrupted torchrun on this machine, no Slurm."""
    ckpt = tmp_path_factory.mktemp("reference")
    result = subprocess.run(
        [str(TORCHRUN), "--standalone", "--nproc-per-node=2", str(TRAIN), *ARGS, "--checkpoint-dir", str(ckpt)],
        capture_output=True, text=True, timeout=JOB_TIMEOUT_S, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    return done_hash(result.stdout)


def submit_training(tmp_path: Path, name: str, max_requeues: int = 3) -> tuple[int, Path]:
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True, exist_ok=True)
    script = tmp_path / f"{name}.sbatch"
    target = replace(local_target(state, cpus=os.cpu_count() or 1, gpus=FAKE_GPUS), torchrun=str(TORCHRUN))
    script.write_text(render_job(target,
                                 [str(TRAIN), *ARGS], job_name=name, max_requeues=max_requeues))
    ckpt = tmp_path / "ckpt"
    job_id = client.submit(script, client.SubmitOptions(
        extra_args=(f"--export=ALL,SLURM_EKS_CHECKPOINT_DIR={ckpt}",)), BACKEND)
    return job_id, ckpt


def log_of(job_id: int) -> str:
    try:
        return client.logs(job_id, BACKEND)
    except client.JobClientError:
        return ""  # not written yet


def wait_for_step(job_id: int, step: int) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        if any(e.get("step", -1) >= step and "loss" in e for e in events(log_of(job_id))):
            return
        time.sleep(0.2)
    pytest.fail(f"job {job_id} never reached step {step}:\n{log_of(job_id)[-3000:]}")


def finish(job_id: int) -> JobInfo:
    return client.wait_for(job_id, timeout_s=JOB_TIMEOUT_S, backend=BACKEND)


def usr2_to_batch_shell(job_id: int) -> None:
    # What Slurm does before the time limit with --signal=B:USR2@lead, triggered now.
    subprocess.run(["scancel", "--signal=USR2", "--batch", str(job_id)], check=True)


def complete_steps(ckpt: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in ckpt.glob("step-*") if (p / ".metadata").exists())


def test_job_trains_checkpoints_and_matches_the_reference(tmp_path: Path, reference_hash: str) -> None:
    job_id, ckpt = submit_training(tmp_path, "plain")
    job = finish(job_id)
    log = log_of(job_id)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), log[-3000:]
    assert done_hash(log) == reference_hash
    assert (ckpt / "DONE").exists() and not (ckpt / "PREEMPTED").exists()
    assert complete_steps(ckpt) == [140, 160]  # the latest two are kept
    assert "slurm-eks: training finished" in log


def test_a_second_job_resumes_where_a_preempted_one_stopped(tmp_path: Path, reference_hash: str) -> None:
    first, ckpt = submit_training(tmp_path, "resume", max_requeues=0)
    wait_for_step(first, 50)
    usr2_to_batch_shell(first)
    stopped = finish(first)
    log = log_of(first)
    assert stopped.state == "FAILED" and "requeues are used up" in log, log[-3000:]
    preempted = json.loads((ckpt / "PREEMPTED").read_text())
    assert 50 <= preempted["step"] < 160
    second, _ = submit_training(tmp_path, "resume", max_requeues=0)
    assert finish(second).state == "COMPLETED"
    log = log_of(second)
    (resumed,) = [e for e in events(log) if e.get("event") == "resumed"]
    assert resumed["step"] == preempted["step"], log[-2000:]
    assert done_hash(log) == reference_hash


def test_usr2_checkpoints_requeues_and_resumes_to_the_same_hash(tmp_path: Path, reference_hash: str) -> None:
    job_id, _ = submit_training(tmp_path, "preempt")
    wait_for_step(job_id, 40)
    usr2_to_batch_shell(job_id)
    job = finish(job_id)
    log = log_of(job_id)
    assert job.state == "COMPLETED", log[-3000:]
    assert "checkpoint saved; requeueing (restart 1 of 3)" in log
    assert done_hash(log) == reference_hash
    # Accounting (sacct --json, normalised) records the job with its restart.
    deadline = time.monotonic() + 30
    while not (records := BACKEND.accounting([job_id])) or records[0].state != "COMPLETED":
        assert time.monotonic() < deadline, records
        time.sleep(0.5)
    assert records[0].restart_count >= 1 and client.status(job_id, BACKEND).restart_count >= 1


def _training_workers(job_id: int) -> dict[int, str]:
    """PID -> RANK of this job's training workers: the processes torchrun gave a RANK, in this job."""
    workers = {}
    for proc in Path("/proc").iterdir():
        try:
            raw = (proc / "environ").read_bytes()
        except (OSError, ValueError):
            continue  # not a process, or gone
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        if env.get("SLURM_JOB_ID") == str(job_id) and "TORCHELASTIC_RUN_ID" in env and "RANK" in env:
            workers[int(proc.name)] = env["RANK"]
    return workers


def test_kill_9_of_one_worker_is_survived(tmp_path: Path, reference_hash: str) -> None:
    job_id, _ = submit_training(tmp_path, "killed")
    wait_for_step(job_id, 45)
    workers = _training_workers(job_id)
    assert sorted(workers.values()) == ["0", "1"], workers
    os.kill(next(pid for pid, rank in workers.items() if rank == "1"), signal.SIGKILL)
    job = finish(job_id)
    log = log_of(job_id)
    assert job.state == "COMPLETED", log[-3000:]
    assert done_hash(log) == reference_hash


def test_a_torn_checkpoint_is_ignored_on_resume(tmp_path: Path, reference_hash: str) -> None:
    first, ckpt = submit_training(tmp_path, "torn", max_requeues=0)
    wait_for_step(first, 70)
    usr2_to_batch_shell(first)
    finish(first)
    newest = complete_steps(ckpt)[-1]
    # What a kill during the write leaves: the step directory without DCP's commit marker.
    (ckpt / f"step-{newest}" / ".metadata").unlink()
    before = complete_steps(ckpt)
    assert newest not in before and before
    second, _ = submit_training(tmp_path, "torn", max_requeues=0)
    assert finish(second).state == "COMPLETED"
    assert done_hash(log_of(second)) == reference_hash

