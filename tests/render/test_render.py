"""sbatch scripts rendered for every partition of both stacks: shellcheck-clean and right for the hardware."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from components.stackfile import load_stack
from jobs.render import RenderError, local_target, render_job, target_for_partition
from scripts.cli.main import app
from tests.conftest import require_tool

IMAGE = "registry.example.com/train:1.0"
ENTRY = ["jobs/train.py", "--steps", "1000"]


def _partitions() -> list[tuple[str, str]]:
    return [(stack, p) for stack in ("dev", "prod") for p in load_stack(stack)[0].partitions]


def _render(stack: str, partition: str, **kw: object) -> str:
    config, _ = load_stack(stack)
    return render_job(target_for_partition(config, stack, partition, image=IMAGE), ENTRY, **kw)


def shellcheck(script: str, tmp_path: Path) -> None:
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    result = subprocess.run([require_tool("shellcheck"), "--severity=style", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(("stack", "partition"), _partitions())
def test_every_partition_renders_shellcheck_clean(stack: str, partition: str, tmp_path: Path) -> None:
    shellcheck(_render(stack, partition, nodes=2), tmp_path)


def test_local_target_renders_shellcheck_clean(tmp_path: Path) -> None:
    script = render_job(local_target(tmp_path, cpus=2, gpus=2), ENTRY)
    shellcheck(script, tmp_path)
    assert "#SBATCH --partition=cpu" in script and "#SBATCH --gpus-per-node=2" in script
    assert "--container-image" not in script and "FI_PROVIDER" not in script and "NCCL_" not in script
    assert "--nproc-per-node=2" in script and f"--output={tmp_path}/logs/%x-%j.out" in script


def test_h100_script_has_gpus_efa_and_the_requeue_trap() -> None:
    script = _render("prod", "gpu-h100", nodes=4, time="2-00:00:00")
    for line in ("#SBATCH --partition=gpu-h100", "#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --cpus-per-task=192", "#SBATCH --mem=0",
                 "#SBATCH --exclusive", "#SBATCH --time=2-00:00:00", "#SBATCH --requeue",
                 "#SBATCH --signal=B:USR2@300", "#SBATCH --open-mode=append",
                 "#SBATCH --output=/shared/logs/%x-%j.out", "set -euo pipefail",
                 "export FI_PROVIDER=efa", "export FI_EFA_USE_DEVICE_RDMA=1", "export FI_EFA_FORK_SAFE=1",
                 'export NCCL_SOCKET_IFNAME="^docker,lo,veth"', "trap on_usr2 USR2",
                 'scontrol requeue "${SLURM_JOB_ID}"', "--nproc-per-node=8", "--rdzv-backend=c10d"):
        assert line in script, line
    assert 'head -n1' in script and "srun --kill-on-bad-exit=1 --container-image=" in script
    assert "NCCL_ALGO" not in script and "NCCL_PROTO" not in script  # forcing them costs bandwidth
    assert "SLURM_RESTART_COUNT" in script and "MAX_REQUEUES" in script


def test_a100_rdma_and_g5_without() -> None:
    assert "FI_EFA_USE_DEVICE_RDMA=1" in _render("prod", "gpu-a100")
    dev = _render("dev", "gpu")
    assert "#SBATCH --gpus-per-node=4" in dev and "FI_PROVIDER" not in dev and "NCCL_DEBUG" in dev


def test_trainium_script_precompiles_then_runs_32_workers() -> None:
    script = _render("prod", "trainium", nodes=2)
    assert "--gpus-per-node" not in script
    assert "--nproc-per-node=32" in script and "neuron_parallel_compile torchrun" in script
    assert 'NEURON_CC_FLAGS="${NEURON_CC_FLAGS:---model-type=transformer --distribution-strategy=llm-training}"' \
        in script
    assert "export FI_PROVIDER=efa" in script


def test_render_errors_say_what_to_change() -> None:
    config, _ = load_stack("prod")
    with pytest.raises(RenderError, match="no partition 'gpu-h200'"):
        target_for_partition(config, "prod", "gpu-h200", image=IMAGE)
    with pytest.raises(RenderError, match="after `--`"):
        render_job(target_for_partition(config, "prod", "gpu-h100", image=IMAGE), [])


def test_partition_default_images() -> None:
    config, _ = load_stack("prod")
    h100 = target_for_partition(config, "prod", "gpu-h100")
    assert h100.image and h100.image.startswith("public.ecr.aws/deep-learning-containers/pytorch-training:")
    assert "neuronx" in (target_for_partition(config, "prod", "trainium").image or "")
    assert target_for_partition(config, "prod", "gpu-h100", image="my/img:1").image == "my/img:1"
    assert target_for_partition(config, "prod", "gpu-h100", container=False).image is None


def test_entry_arguments_are_quoted() -> None:
    config, _ = load_stack("prod")
    script = render_job(target_for_partition(config, "prod", "gpu-h100", container=False),
                        ["jobs/train.py", "--data", "/shared/my data/tokens.bin"])
    assert "jobs/train.py --data '/shared/my data/tokens.bin'" in script and "--container-image" not in script


def test_render_command_for_the_h100_partition(tmp_path: Path) -> None:
    """The issue's example, as a user types it: no --image (the partition's default), shellcheck-clean."""
    cli = Path(sys.executable).parent / "slurm-eks"
    result = subprocess.run([str(cli), "job", "render", "--stack", "prod", "--partition", "gpu-h100", "--nodes", "4",
                             "--", "jobs/train.py"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    shellcheck(result.stdout, tmp_path)
    for line in ("#SBATCH --gpus-per-node=8", "#SBATCH --nodes=4", "export FI_PROVIDER=efa", "trap on_usr2 USR2",
                 "#SBATCH --time=7-00:00:00"):
        assert line in result.stdout


def test_render_command_errors_exit_2() -> None:
    cli = Path(sys.executable).parent / "slurm-eks"
    result = subprocess.run([str(cli), "job", "render", "--stack", "prod", "--partition", "gpu-h200", "--",
                             "jobs/train.py"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "no partition 'gpu-h200'" in result.stderr and "Traceback" not in result.stderr


def _render_cli(*args: str) -> Result:
    return CliRunner().invoke(app, ["job", "render", *args], env={"NO_COLOR": "1"})


def test_render_refuses_unknown_options_before_the_entry_point() -> None:
    result = _render_cli("--stack", "prod", "--partition", "gpu-h100", "--node", "4", "--", "jobs/train.py")
    assert result.exit_code == 2 and "No such option: --node" in result.output
    assert "--job-name=--node" not in result.output


def test_options_after_the_double_dash_belong_to_the_entry_point() -> None:
    result = _render_cli("--stack", "prod", "--partition", "gpu-h100", "--", "jobs/train.py", "--steps", "10")
    assert result.exit_code == 0, result.output
    assert "jobs/train.py --steps 10" in result.output


@pytest.mark.parametrize("time", ["2h", "1:2:3:4", "1-", "-5"])
def test_render_refuses_a_time_slurm_would_not_take(time: str) -> None:
    result = _render_cli("--stack", "prod", "--partition", "gpu-h100", "--time", time, "--", "jobs/train.py")
    assert result.exit_code == 2 and "not a Slurm time limit" in result.output


def test_render_suggests_the_nearest_stack_and_partition() -> None:
    assert "did you mean 'gpu-h100'?" in _render_cli("-s", "prod", "-p", "gpu-h10", "--", "x.py").output
    assert "did you mean `prod`?" in _render_cli("-s", "prdo", "-p", "gpu-h100", "--", "x.py").output


def test_render_into_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "job.sbatch"
    result = _render_cli("-s", "prod", "-p", "gpu-h100", "-o", str(target), "--", "jobs/train.py")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip() == f"error: cannot write {target}: No such file or directory"
