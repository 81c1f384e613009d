"""What a rendered job script does, run by bash with srun and scontrol stubbed: the requeue budget, stale
outcome markers, and the container flags that keep /shared (and the checkpoints) inside the container."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.stackfile import load_stack
from jobs.render import render_job, target_for_partition

IMAGE = "registry.example.com/train:1.0"
# srun stand-in: records its arguments, then plays the training run's outcome (a marker and an exit code).
SRUN = """#!/bin/bash
printf '%s\\n' "$@" > "$STUB_LOG/srun.args"
case "$FAKE_OUTCOME" in
  done) touch "$SLURM_EKS_CHECKPOINT_DIR/DONE" ;;
  preempted) touch "$SLURM_EKS_CHECKPOINT_DIR/PREEMPTED" ;;
esac
exit "${FAKE_RC:-0}"
"""
SCONTROL = """#!/bin/bash
if [[ "$1 $2" == "show hostnames" ]]; then echo node-0; exit 0; fi
echo "$@" >> "$STUB_LOG/scontrol.calls"
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config, _ = load_stack("prod")
    text = render_job(target_for_partition(config, "prod", "gpu-h100", image=IMAGE), ["jobs/train.py"], nodes=2)
    path = tmp_path_factory.mktemp("job") / "job.sbatch"
    path.write_text(text)
    return path


def run(script: Path, tmp_path: Path, outcome: str, restarts: int, rc: int = 0,
        stale: str | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    stubs, ckpt = tmp_path / "bin", tmp_path / "ckpt"
    stubs.mkdir()
    ckpt.mkdir()
    for name, body in (("srun", SRUN), ("scontrol", SCONTROL)):
        (stubs / name).write_text(body)
        (stubs / name).chmod(0o755)
    if stale:
        (ckpt / stale).touch()  # left by an earlier run of the same job name
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path),
           "SLURM_EKS_CHECKPOINT_DIR": str(ckpt), "SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "train",
           "SLURM_JOB_NODELIST": "node-[0-1]", "SLURM_NNODES": "2", "SLURM_RESTART_COUNT": str(restarts),
           "FAKE_OUTCOME": outcome, "FAKE_RC": str(rc)}
    result = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=60)
    return result, tmp_path / "scontrol.calls"


@pytest.mark.parametrize("restarts", [0, 2])
def test_a_preempted_run_requeues_while_the_budget_lasts(script: Path, tmp_path: Path, restarts: int) -> None:
    result, calls = run(script, tmp_path, "preempted", restarts)
    assert result.returncode == 0, result.stderr
    assert calls.read_text() == "requeue 42\n"
    assert f"requeueing (restart {restarts + 1} of 3)" in result.stdout


def test_the_fourth_preemption_does_not_requeue(script: Path, tmp_path: Path) -> None:
    # MAX_REQUEUES=3: restarts 0, 1 and 2 requeue; the run after the third requeue stops for good.
    result, calls = run(script, tmp_path, "preempted", restarts=3)
    assert result.returncode == 1 and not calls.exists()
    assert "3 requeues are used up" in result.stderr


@pytest.mark.parametrize("stale", ["DONE", "PREEMPTED"])
def test_a_stale_marker_from_an_earlier_run_is_not_believed(script: Path, tmp_path: Path, stale: str) -> None:
    result, calls = run(script, tmp_path, "crash", restarts=0, rc=7, stale=stale)
    assert result.returncode == 7 and not calls.exists()
    assert "training failed (exit 7)" in result.stderr


def test_a_finished_run_exits_0_without_requeue(script: Path, tmp_path: Path) -> None:
    result, calls = run(script, tmp_path, "done", restarts=1)
    assert result.returncode == 0 and not calls.exists() and "training finished" in result.stdout


def test_the_step_runs_in_the_image_with_shared_mounted_and_the_submit_directory_as_workdir(
        script: Path, tmp_path: Path) -> None:
    run(script, tmp_path, "done", restarts=0)
    args = (tmp_path / "srun.args").read_text().splitlines()
    assert args[:4] == ["--kill-on-bad-exit=1", f"--container-image={IMAGE}",
                        "--container-mounts=/shared:/shared", f"--container-workdir={tmp_path}"]
    assert "--nproc-per-node=8" in args and args[-1] == "jobs/train.py"


def test_efa_without_gpudirect_rdma_on_g5() -> None:
    config, _ = load_stack("dev")
    partition = config.partitions["gpu"].model_copy(update={"instance_types": ["g5.48xlarge"], "efa": True})
    config = config.model_copy(update={"partitions": {"gpu": partition}})
    text = render_job(target_for_partition(config, "dev", "gpu", image=IMAGE), ["jobs/train.py"])
    assert "export FI_PROVIDER=efa" in text and "FI_EFA_USE_DEVICE_RDMA" not in text
