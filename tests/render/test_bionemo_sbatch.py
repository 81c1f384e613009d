"""`slurm-eks job bionemo`: the BioNeMo inference sbatch script (jobs/templates/bionemo.sbatch.j2) is shellcheck-clean
for every GPU partition, asks for one task per GPU with whole cores each, imports the pinned image once through
pyxis with /shared and the models mounted, keeps EFA settings for several nodes, and, run under bash with Slurm's
and the image's stand-ins, finds the weights in one step and runs infer_esm2 on every GPU in the next."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from components.config.stackfile import load_stack
from jobs.render import RenderError, render_bionemo, target_for_partition
from scripts.cli.main import app
from scripts.k8s import bionemo
from tests.conftest import require_tool
from tests.render.standins import JobSandbox, exported

DATA = ["--data-path", "/shared/alice/sequences.csv"]
GPU_PARTITIONS = [("prod", "gpu-h100"), ("prod", "gpu-a100")]


def _script(partition: str = "gpu-h100", arguments: list[str] = DATA, **kw: Any) -> str:
    return bionemo.sbatch_script(load_stack("prod")[0], "prod", partition, arguments, **kw)


def _shellcheck(script: str, tmp_path: Path) -> None:
    path = tmp_path / "bionemo.sbatch"
    path.write_text(script)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0
    result = subprocess.run([require_tool("shellcheck"), "--severity=style", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(("stack", "partition"), GPU_PARTITIONS)
@pytest.mark.parametrize("nodes", [1, 2])
def test_every_gpu_partition_renders_shellcheck_clean(stack: str, partition: str, nodes: int, tmp_path: Path) -> None:
    _shellcheck(_script(partition, nodes=nodes), tmp_path)


def test_a_given_checkpoint_and_results_render_shellcheck_clean(tmp_path: Path) -> None:
    script = _script(arguments=[*DATA, "--checkpoint-path", "/shared/alice/ft", "--results-path", "/shared/a b"])
    _shellcheck(script, tmp_path)
    assert "download_bionemo_data" not in script and "checkpoint=/shared/alice/ft" in script
    assert "SLURM_EKS_RESULTS_DIR='/shared/a b'" in script


@pytest.mark.parametrize(("partition", "gpus", "cpus"), [("gpu-h100", 8, 22), ("gpu-a100", 8, 10)])
def test_one_task_per_gpu_with_whole_cores(partition: str, gpus: int, cpus: int) -> None:
    script = _script(partition)
    for line in (f"#SBATCH --ntasks-per-node={gpus}", f"#SBATCH --gpus-per-node={gpus}",
                 f"#SBATCH --cpus-per-task={cpus}", "#SBATCH --mem=0", "#SBATCH --exclusive",
                 "#SBATCH --job-name=bionemo-esm2", f"#SBATCH --partition={partition}",
                 "#SBATCH --output=/shared/logs/%u/%x-%j.out"):
        assert line in script, line
    # 190 and 94 CPUs (slurm_cpus): 23 and 11 a task would be odd, and CR_Core_Memory would round each up to 24 and
    # 12, more than the node has; whole cores (2 threads) fit.
    assert cpus % 2 == 0 and gpus * cpus <= {"gpu-h100": 190, "gpu-a100": 94}[partition]
    # Lightning requires --ntasks-per-node to equal infer_esm2's devices.
    assert f"--num-gpus {gpus} --num-nodes \"${{SLURM_NNODES}}\"" in script
    assert "--requeue" not in script and "--signal" not in script  # inference keeps no state to stop cleanly


def test_the_pinned_image_is_imported_once_and_every_step_sees_shared_and_the_models() -> None:
    script = _script()
    assert "import_image 'docker://nvcr.io#nvidia/clara/bionemo-framework:2.7.1'" in script
    assert script.count("--container-mounts=/shared:/shared,/models:/models") == 2
    assert script.count("--container-name=nvcr.io+nvidia+clara+bionemo-framework+2.7.1") == 2
    assert exported(script)["BIONEMO_CACHE_DIR"] == '"${BIONEMO_CACHE_DIR:-/models/bionemo}"'
    other = _script(image="registry.example.com/bionemo:2.7.1")
    assert "import_image 'docker://registry.example.com#bionemo:2.7.1'" in other


def test_efa_settings_only_for_several_nodes() -> None:
    one, two = exported(_script(nodes=1)), exported(_script(nodes=2))
    assert "NCCL_NET" not in one and not [k for k in one if k.startswith("FI_")]
    assert two["NCCL_NET"] == '"${NCCL_NET:-Libfabric}"' and two["FI_EFA_USE_HUGE_PAGE"] == "0"
    assert one["NCCL_SOCKET_IFNAME"] == two["NCCL_SOCKET_IFNAME"] == '"^docker,lo,veth"'


def _image_standins(sandbox: JobSandbox, cached: bool = True) -> None:
    """download_bionemo_data and infer_esm2 as the image has them (srun's stand-in runs them on the host)."""
    download = sandbox.bin / "download_bionemo_data"
    download.write_text("#!/bin/bash\n" + (
        'echo "downloading" >&2\necho "${BIONEMO_CACHE_DIR}/0798-esm2_650M_nemo2.tar.gz.untar"\n' if cached else
        "echo 'OSError: [Errno 30] Read-only file system' >&2\nexit 1\n"))
    infer = sandbox.bin / "infer_esm2"
    infer.write_text('#!/bin/bash\npython3 -c \'import json, os, sys; print(json.dumps({"argv": sys.argv[1:], '
                     '"cache": os.environ.get("BIONEMO_CACHE_DIR")}))\' "$@" >> "${STUB_LOG}/infer.jsonl"\n')
    for tool in (download, infer):
        tool.chmod(0o755)


def _render_in(sandbox: JobSandbox, nodes: int = 2) -> Path:
    config = load_stack("prod")[0]
    target = sandbox.target(target_for_partition(config, "prod", "gpu-h100", bionemo.IMAGE))
    steps = bionemo.sbatch_steps(bionemo.infer_request(DATA, "/shared", "/models"), 8, "/models")
    path = sandbox.root / "bionemo.sbatch"
    path.write_text(render_bionemo(target, steps, nodes=nodes, threads_per_core=2))
    return path


def test_the_script_finds_the_weights_then_runs_infer_esm2_on_every_gpu(sandbox: JobSandbox) -> None:
    _image_standins(sandbox)
    result = sandbox.run(_render_in(sandbox), unset=("SLURM_EKS_CHECKPOINT_DIR",), SLURM_JOB_NAME="bionemo-esm2")
    assert result.returncode == 0, result.stderr
    srun = [c["argv"] for c in sandbox.calls("srun")]
    assert len(srun) == 2
    assert srun[0][:3] == ["--nodes=1", "--ntasks=1", "--ntasks-per-node=1"]  # step 1: one task
    assert srun[0][-4:] == ["download_bionemo_data", "--source", "ngc", "esm2/650m:2.0"]
    assert srun[1][0] == "--kill-on-bad-exit=1"
    assert any(a.startswith("--container-image=") and a.endswith(".sqsh") for a in srun[1])
    (call,) = [json.loads(line) for line in (sandbox.log / "infer.jsonl").read_text().splitlines()]
    results = sandbox.checkpoint_root / next(iter(p.name for p in sandbox.checkpoint_root.iterdir())) / \
        "bionemo-esm2-42"
    assert results.is_dir() and oct(results.stat().st_mode & 0o777) == "0o700"  # the job's own, private
    assert call["argv"] == ["--checkpoint-path", "/models/bionemo/0798-esm2_650M_nemo2.tar.gz.untar",
                            "--data-path", "/shared/alice/sequences.csv", "--results-path", str(results),
                            "--num-gpus", "8", "--num-nodes", "2", "--precision", "bf16-mixed",
                            "--include-embeddings"]
    assert call["cache"] == "/models/bionemo"
    assert f"predictions in {results}" in result.stdout
    enroot = sandbox.calls("enroot")
    assert [c["argv"][-1] for c in enroot] == ["docker://nvcr.io#nvidia/clara/bionemo-framework:2.7.1"]


def test_weights_that_are_not_there_stop_the_job_before_inference(sandbox: JobSandbox) -> None:
    _image_standins(sandbox, cached=False)
    result = sandbox.run(_render_in(sandbox), unset=("SLURM_EKS_CHECKPOINT_DIR",), SLURM_JOB_NAME="bionemo-esm2")
    assert result.returncode == 1
    assert "the weights are not in /models/bionemo and could not be downloaded there" in result.stderr
    assert "Read-only file system" in result.stderr and not (sandbox.log / "infer.jsonl").exists()


def test_a_cache_of_your_own_is_used_when_exported(sandbox: JobSandbox) -> None:
    _image_standins(sandbox)
    own = str(sandbox.shared / "alice-cache")
    result = sandbox.run(_render_in(sandbox, nodes=1), unset=("SLURM_EKS_CHECKPOINT_DIR",),
                         SLURM_JOB_NAME="bionemo-esm2", BIONEMO_CACHE_DIR=own, SLURM_NNODES="1")
    assert result.returncode == 0, result.stderr
    (call,) = [json.loads(line) for line in (sandbox.log / "infer.jsonl").read_text().splitlines()]
    assert call["cache"] == own and call["argv"][1] == f"{own}/0798-esm2_650M_nemo2.tar.gz.untar"


@pytest.mark.parametrize(("partition", "kw", "message"), [
    ("trainium", {}, r"partition trainium: .* BioNeMo's image runs on NVIDIA GPUs.*Fix: pick a partition"),
    ("gpu-h100", {"job_name": "interactive"}, r"--job-name interactive: Lightning ignores Slurm.*Fix"),
    ("gpu-h100", {"job_name": "bash"}, r"--job-name bash: Lightning ignores Slurm"),
    ("gpu-h100", {"nodes": 9}, r"--nodes 9 is more than partition gpu-h100 can have"),
    ("gpu-h100", {"time": "30-00:00:00"}, r"--time 30-00:00:00 is longer than partition gpu-h100 allows"),
    ("gpu-h10", {}, r"no partition 'gpu-h10'; did you mean 'gpu-h100'"),
])
def test_requests_it_cannot_run_are_refused(partition: str, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(RenderError, match=message):
        _script(partition, **kw)


def test_without_an_image_there_is_nothing_to_run() -> None:
    target = target_for_partition(load_stack("prod")[0], "prod", "gpu-h100", container=False)
    steps = bionemo.sbatch_steps(bionemo.infer_request(DATA, "/shared", "/models"), 8, "/models")
    with pytest.raises(RenderError, match=r"partition gpu-h100: BioNeMo runs in its image; pass --image"):
        render_bionemo(target, steps)


def test_a_stack_without_the_model_file_system_is_refused() -> None:
    with pytest.raises(RenderError, match=r"storage\.efs is not set in stacks/Pulumi\.dev\.yaml.*Fix"):
        bionemo.sbatch_script(load_stack("dev")[0], "dev", "gpu", DATA)


def test_the_command_writes_the_script_and_refuses_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "bionemo.sbatch"
    ok = runner.invoke(app, ["job", "bionemo", "--stack", "prod", "--partition", "gpu-a100", "-N", "2", "-o",
                             str(out), "--", *DATA])
    assert ok.exit_code == 0, ok.output
    assert f"wrote {out}" in ok.output and "#SBATCH --nodes=2" in out.read_text()
    for args in (["--partition", "trainium", "--", *DATA], ["--partition", "gpu-h100"],
                 ["--partition", "gpu-h100", "--", *DATA, "--num-nodes", "2"]):
        bad = runner.invoke(app, ["job", "bionemo", "--stack", "prod", *args])
        assert bad.exit_code == 2, bad.output
        assert "Traceback" not in bad.output and len(bad.output.strip().splitlines()) == 1
        assert re.match(r"error: .*Fix", bad.output)
