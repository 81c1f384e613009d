"""sbatch scripts rendered for every partition of both stacks: shellcheck-clean and right for the hardware."""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from components.config.cluster import ClusterConfig
from components.config.stackfile import load_stack
from components.config.validation import parse_cluster_config
from jobs.render import (
    SLURM_KILL_WAIT_S,
    TORCHRUN_SHUTDOWN_TIMEOUT_S,
    JobTarget,
    RenderError,
    SignalLead,
    checkpoint_signal_lead,
    container_image,
    enroot_uri,
    local_target,
    precompile_key,
    render_image_pull,
    render_job,
    signal_lead,
    slurm_time_seconds,
    stop_wait,
    target_for_partition,
)
from scripts.cli.main import app
from tests.config.helpers import raw_config
from tests.conftest import require_tool
from tests.render.standins import exported

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
    assert "--container-image" not in script and "NCCL_" not in script and "import_image '" not in script
    assert not [name for name in exported(script) if name.startswith("FI_")]
    assert "--nproc-per-node=2" in script and f"--output={tmp_path}/logs/%x-%j.out" in script


def test_h100_script_has_gpus_efa_and_the_requeue_trap() -> None:
    script = _render("prod", "gpu-h100", nodes=4, time="2-00:00:00")
    for line in ("#SBATCH --partition=gpu-h100", "#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --cpus-per-task=190", "#SBATCH --mem=0",  # the pod's 190
                 "#SBATCH --exclusive", "#SBATCH --time=2-00:00:00", "#SBATCH --requeue",
                 "#SBATCH --signal=B:USR2@300", "#SBATCH --open-mode=append",
                 "#SBATCH --output=/shared/logs/%u/%x-%j.out", "set -euo pipefail",
                 'export NCCL_SOCKET_IFNAME="^docker,lo,veth"', "trap on_usr2 USR2",
                 'scontrol requeue "${SLURM_JOB_ID}"', "--nproc-per-node=8", "--rdzv-backend=c10d"):
        assert line in script, line
    assert 'head -n1' in script and "srun --kill-on-bad-exit=1 --container-image=" in script
    assert "NCCL_ALGO" not in script and "NCCL_PROTO" not in script  # forcing them costs bandwidth
    assert "SLURM_RESTART_COUNT" in script and "MAX_REQUEUES" in script


def libfabric(script: str) -> dict[str, str]:
    return {name: value for name, value in exported(script).items() if name.startswith("FI_")}


@pytest.mark.parametrize("partition", ["gpu-h100", "gpu-a100"])
def test_gpu_efa_settings_are_the_cheatsheets_for_current_libfabric(partition: str) -> None:
    # efa-cheatsheet.md preset 3.1 (libfabric >= 1.18, aws-ofi-nccl >= 1.7): FI_PROVIDER=efa,
    # FI_EFA_USE_DEVICE_RDMA=1 and FI_EFA_FORK_SAFE=1 are defaults or no-ops there.
    script = _render("prod", partition)
    assert libfabric(script) == {"FI_EFA_USE_HUGE_PAGE": "0"}
    # NCCL over aws-ofi-nccl or a failed start, never a quiet fall-back to TCP sockets.
    assert exported(script)["NCCL_NET"] == '"${NCCL_NET:-Libfabric}"'


def test_no_efa_settings_without_efa() -> None:
    dev = _render("dev", "gpu")
    assert "#SBATCH --gpus-per-node=4" in dev and libfabric(dev) == {} and "NCCL_DEBUG" in dev
    assert "NCCL_NET" not in exported(dev)  # no EFA: NCCL's sockets are the network


def test_trainium_script_precompiles_then_runs_32_workers() -> None:
    script = _render("prod", "trainium", nodes=2)
    assert "--gpus-per-node" not in script
    assert "--nproc-per-node=32" in script and "neuron_parallel_compile torchrun" in script
    env = exported(script)
    assert env["NEURON_CC_FLAGS"] == \
        '"${NEURON_CC_FLAGS:---model-type=transformer --distribution-strategy=llm-training --auto-cast=none}"'
    assert env["SLURM_EKS_DEVICE"] == "xla" and "NEURON_RT_NUM_CORES" not in env
    # The Neuron multi-node guide's EFA settings, less FI_EFA_FORK_SAFE (AL2 only).
    assert libfabric(script) == {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}


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
    for line in ("#SBATCH --gpus-per-node=8", "#SBATCH --nodes=4", "export FI_EFA_USE_HUGE_PAGE=0", "trap on_usr2 USR2",
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


# --- partition limits -----------------------------------------------------------------------------------

def test_nodes_above_the_partitions_max_nodes_are_refused() -> None:
    config, _ = load_stack("prod")
    target = target_for_partition(config, "prod", "trainium", image=IMAGE)
    assert "#SBATCH --nodes=32" in render_job(target, ENTRY, nodes=32)
    with pytest.raises(RenderError, match=r"^--nodes 33 is more than partition trainium can have "
                       r"\(partitions\.trainium\.maxNodes = 32 in stack prod\); use --nodes 32 or fewer"):
        render_job(target, ENTRY, nodes=33)


def test_render_command_names_max_nodes() -> None:
    result = _render_cli("-s", "prod", "-p", "gpu-h100", "--nodes", "9", "--", "jobs/train.py")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "--nodes 9 is more than partition gpu-h100 can have (partitions.gpu-h100.maxNodes = 8" in result.output


def test_a_time_limit_above_the_partitions_max_time_is_refused() -> None:
    """Slurm would accept the job and keep it pending forever (PartitionTimeLimit, squeue(1)); say so at render."""
    config, _ = load_stack("dev")  # gpu: maxTime 1-00:00:00
    target = target_for_partition(config, "dev", "gpu", image=IMAGE)
    assert "#SBATCH --time=1-00:00:00" in render_job(target, ENTRY, time="1-00:00:00")
    assert "#SBATCH --time=23:59:00" in render_job(target, ENTRY, time="23:59:00")
    for too_long in ("9-00:00:00", "1-00:01:00", "UNLIMITED"):
        with pytest.raises(RenderError, match=rf"^--time {too_long} is longer than partition gpu allows "
                           r"\(partitions\.gpu\.maxTime = 1-00:00:00 in stack dev\).*use --time 1-00:00:00 or less"):
            render_job(target, ENTRY, time=too_long)


def test_render_command_refuses_a_time_above_max_time_and_negative_requeues() -> None:
    result = _render_cli("-s", "dev", "-p", "gpu", "--time", "9-00:00:00", "--", "jobs/train.py")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "--time 9-00:00:00 is longer than partition gpu allows" in result.output
    result = _render_cli("-s", "dev", "-p", "gpu", "--max-requeues", "-1", "--", "jobs/train.py")
    assert result.exit_code == 2 and result.output.strip() == (
        "error: --max-requeues -1: give 0 (never requeue after a preemption) or more")
    assert _render_cli("-s", "dev", "-p", "gpu", "--max-requeues", "0", "--", "jobs/train.py").exit_code == 0


# --- the signal lead ------------------------------------------------------------------------------------

def test_the_lead_fits_the_final_checkpoint_at_the_stacks_fsx_throughput() -> None:
    config, _ = load_stack("prod")  # PERSISTENT_2, 4800 GiB at 250 MB/s/TiB: 1171.875 MB/s
    target = target_for_partition(config, "prod", "gpu-h100", image=IMAGE)
    assert target.checkpoint_write_mb_s == 250 * 4800 / 1024
    lead = checkpoint_signal_lead(target, 1120)  # a 70B model with AdamW state, 16 bytes a parameter
    assert lead.seconds == 300 + math.ceil(2 * 1120 * 1000 / (250 * 4800 / 1024)) == 2212
    assert lead.formula == "300 s + 2 x 1120 GB / 1172 MB/s (FSx baseline) = 2212 s"
    script = render_job(target, ENTRY, time="7-00:00:00", lead=lead)
    assert "#SBATCH --signal=B:USR2@2212\n# Signal lead (stop, then write the final checkpoint): 300 s" in script
    assert checkpoint_signal_lead(target, 0.1).seconds == 301  # never below the default


def test_scratch_file_systems_write_at_100_mb_s_per_tib() -> None:
    config, _ = load_stack("dev")  # SCRATCH_2, 1200 GiB
    assert target_for_partition(config, "dev", "gpu", image=IMAGE).checkpoint_write_mb_s == 100 * 1200 / 1024


@pytest.mark.parametrize(("time", "seconds"), [("30", 1800), ("30:15", 1815), ("2:00:00", 7200), ("1-2", 93600),
                                               ("1-02:30", 95400), ("7-00:00:00", 604800), ("UNLIMITED", None),
                                               ("infinite", None), ("0", None)])
def test_slurm_time_limits_in_seconds(time: str, seconds: int | None) -> None:
    assert slurm_time_seconds(time) == seconds


def test_a_lead_as_long_as_the_time_limit_is_refused() -> None:
    config, _ = load_stack("prod")
    target = target_for_partition(config, "prod", "gpu-h100", image=IMAGE)
    with pytest.raises(RenderError, match=r"signal lead 2212 s \(300 s \+ 2 x 1120 GB .*\) is not shorter than "
                       r"--time 30 \(1800 s\)"):
        render_job(target, ENTRY, time="30", lead=checkpoint_signal_lead(target, 1120))
    assert "USR2@1799" in render_job(target, ENTRY, time="30", lead=SignalLead(1799))
    with pytest.raises(RenderError, match="outside sbatch's 0-65535 s"):
        render_job(target, ENTRY, lead=SignalLead(65536))


def test_checkpoint_sizes_that_give_no_lead_are_refused(tmp_path: Path) -> None:
    config, _ = load_stack("prod")
    with pytest.raises(RenderError, match=r"^--checkpoint-gb 0 is not a size"):
        checkpoint_signal_lead(target_for_partition(config, "prod", "gpu-h100", image=IMAGE), 0)
    with pytest.raises(RenderError, match=r"^--checkpoint-gb 10: the throughput of .* is unknown here; give "
                       r"--signal-lead SECONDS instead"):
        checkpoint_signal_lead(local_target(tmp_path, cpus=2, gpus=2), 10)


def test_render_command_prints_the_lead_formula_and_refuses_two_leads() -> None:
    result = CliRunner().invoke(app, ["job", "render", "-s", "prod", "-p", "gpu-h100", "--checkpoint-gb", "1120",
                                      "--", "jobs/train.py"], env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "#SBATCH --signal=B:USR2@2212" in result.stdout
    assert result.stderr.strip() == "signal lead: 300 s + 2 x 1120 GB / 1172 MB/s (FSx baseline) = 2212 s"
    both = _render_cli("-s", "prod", "-p", "gpu-h100", "--checkpoint-gb", "10", "--signal-lead", "600", "--", "x.py")
    assert both.exit_code == 2
    assert "--signal-lead 600 and --checkpoint-gb 10 both set the lead; give one of them" in both.output
    assert "USR2@600" in _render_cli("-s", "prod", "-p", "gpu-h100", "--signal-lead", "600", "--", "x.py").output


# --- the signal lead covers the wait for the ranks' stop agreement ------------------------------------------

def _h100() -> JobTarget:
    config, _ = load_stack("prod")
    return target_for_partition(config, "prod", "gpu-h100", image=IMAGE)


@pytest.mark.parametrize(("entry", "step", "wait"), [
    (["jobs/train.py", "--stop-check-every", "10"], 30, 300),  # fixed: 10 steps x 30 s
    (["jobs/train.py", "--stop-check-every=4"], 213, 852),
    (["jobs/train.py"], 213, 213),  # time-based: one step, when a step is over 10 s
    (["jobs/train.py"], 2.5, 10),  # time-based: about every 10 s
    (["jobs/recipes/hf_finetune.py", "--bf16"], 40, 40),  # the recipe's default: every optimizer step
])
def test_a_signal_lead_must_cover_the_wait_to_the_boundary(entry: list[str], step: float, wait: int) -> None:
    target = _h100()
    assert math.ceil(stop_wait(entry, step).seconds) == wait
    assert signal_lead(target, entry, wait, step_seconds=step).seconds == wait  # exactly the wait: taken
    with pytest.raises(RenderError) as refused:
        signal_lead(target, entry, wait - 1, step_seconds=step)
    message = str(refused.value)
    assert message.startswith(f"--signal-lead {wait - 1} cannot cover the wait for the ranks to agree on a stop, "
                              f"{wait} s (")
    assert f"--step-seconds {step:g}" in message and f"give --signal-lead of at least {wait} s" in message
    assert ("drop --stop-check-every" in message) == ("--stop-check-every" in " ".join(entry))
    assert ("--stop-check-every" in message) == ("--stop-check-every" in " ".join(entry))
    assert signal_lead(target, entry, 65535).seconds == 65535  # without --step-seconds nothing is known


def test_the_70b_example_stop_check_every_10_steps_needs_a_lead_of_its_own() -> None:
    """10 steps at 213 s between stop checks: a 300 s lead ends in TIMEOUT, so render refuses it; sized from the
    step and the checkpoint, the lead is the wait, the default margin and the write."""
    target, entry = _h100(), ["jobs/train.py", "--model", "llama3-70b", "--stop-check-every", "10"]
    with pytest.raises(RenderError, match=r"^--signal-lead 300 cannot cover .* 2130 s \(10 steps x 213 s: "
                       r"--stop-check-every 10, --step-seconds 213\)"):
        signal_lead(target, entry, 300, step_seconds=213)
    write = math.ceil(2 * 847 * 1000 / (250 * 4800 / 1024))
    assert signal_lead(target, entry, checkpoint_gb=847, step_seconds=213).seconds == 2130 + 300 + write == 3876
    # The default, time-based checks: one step to wait.
    lead = signal_lead(target, entry[:-2], checkpoint_gb=847, step_seconds=213)
    assert lead.seconds == 213 + 300 + write == 1959
    assert lead.formula.startswith("213 s to agree on the stop (one step: --step-seconds 213")
    assert signal_lead(target, entry[:-2]) == SignalLead(300)  # nothing known: the default, as before


def test_render_command_refuses_a_lead_shorter_than_the_stop_wait() -> None:
    refused = _render_cli("-s", "prod", "-p", "gpu-h100", "--step-seconds", "213", "--signal-lead", "300", "--",
                          "jobs/train.py", "--stop-check-every", "10")
    assert refused.exit_code == 2 and "--signal-lead 300 cannot cover" in refused.output
    sized = CliRunner().invoke(app, ["job", "render", "-s", "prod", "-p", "gpu-h100", "--step-seconds", "213",
                                     "--", "jobs/train.py"], env={"NO_COLOR": "1"})
    assert sized.exit_code == 0, sized.output
    assert "#SBATCH --signal=B:USR2@513" in sized.stdout
    bad = _render_cli("-s", "prod", "-p", "gpu-h100", "--step-seconds", "0", "--", "jobs/train.py")
    assert bad.exit_code == 2 and "--step-seconds 0 is not a duration" in bad.output


# --- stopping: torchrun's grace period --------------------------------------------------------------------

def test_torchrun_shutdown_fits_inside_slurms_kill_wait() -> None:
    gpu = exported(_render("prod", "gpu-h100"))
    timeout = int(gpu["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"].strip('"').split(":-")[1].rstrip("}"))
    assert timeout == TORCHRUN_SHUTDOWN_TIMEOUT_S < SLURM_KILL_WAIT_S == 30
    for stack, partition in _partitions():  # torch 2.9 in the default images rejects the flag
        code = [line for line in _render(stack, partition).splitlines() if not line.lstrip().startswith("#")]
        assert not [line for line in code if "--shutdown-timeout" in line]
    # The Neuron image's torch 2.9 reads no shutdown timeout: none is set there.
    assert "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in exported(_render("prod", "trainium"))


def test_torch_reads_the_shutdown_timeout_the_script_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    launcher = pytest.importorskip("torch.distributed.launcher.api")
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(TORCHRUN_SHUTDOWN_TIMEOUT_S))
    config = launcher.LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=1)
    assert config.shutdown_timeout == TORCHRUN_SHUTDOWN_TIMEOUT_S


# --- rank-labelled logs ----------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
TORCHRUNS = [Path(sys.executable).parent / "torchrun", REPO / ".venv-xla" / "bin" / "torchrun"]


@pytest.mark.torch
@pytest.mark.parametrize("torchrun", TORCHRUNS, ids=["torch-2.13", "torch-xla-venv"])
def test_every_worker_line_carries_its_global_rank(torchrun: Path, tmp_path: Path) -> None:
    """The prefix template and --tee as the script passes them, through a real torchrun."""
    if not torchrun.exists():
        pytest.skip(f"{torchrun} is not installed")
    script = _render("prod", "gpu-h100")
    template = exported(script)["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"].strip("'")
    assert "--max-restarts=2 --tee=3 \\\n" in script  # on the torchrun line
    worker = tmp_path / "worker.py"
    worker.write_text("import os\nprint('hello from', os.environ['RANK'], flush=True)\n")
    env = {**os.environ, "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": template, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node=2", "--tee=3", str(worker)],
                            capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(line for line in result.stdout.splitlines() if "hello" in line) == \
        ["[0]: hello from 0", "[1]: hello from 1"]


# --- image references --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("reference", "uri"), [
    ("public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0", "docker://public.ecr.aws#neuron/pytorch-training-neuronx:2.9.0"),
    ("123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1", "docker://123456789012.dkr.ecr.us-west-2.amazonaws.com#train:1"),
    ("registry:5000/team/train:1", "docker://registry:5000#team/train:1"),
    ("localhost/train:1", "docker://localhost#train:1"),
    ("MyRegistry/train:1", "docker://MyRegistry#train:1"),
    ("nvidia/cuda:12.4.0-base", "docker://nvidia/cuda:12.4.0-base"),  # a Docker Hub namespace
    ("ubuntu:24.04", "docker://ubuntu:24.04"),
    ("docker://nvcr.io#nvidia/pytorch:25.06-py3", "docker://nvcr.io#nvidia/pytorch:25.06-py3"),
    ("ghcr.io/org/img@sha256:abc", "docker://ghcr.io#org/img@sha256:abc"),
])
def test_docker_references_become_enroot_uris(reference: str, uri: str) -> None:
    assert enroot_uri(reference) == uri


def test_each_image_reference_has_its_own_file_and_container() -> None:
    one = container_image("public.ecr.aws/neuron/train:2.9.0", "/shared")
    assert one.file("alice") == "/shared/images/alice/public.ecr.aws+neuron+train+2.9.0.sqsh"
    assert one.file("bob") == "/shared/images/bob/public.ecr.aws+neuron+train+2.9.0.sqsh"  # never alice's file
    assert one.name == "public.ecr.aws+neuron+train+2.9.0" and ":" not in one.name  # pyxis splits NAME:FLAGS
    other = container_image("public.ecr.aws/neuron/train:2.9.1", "/shared")
    assert other.file("alice") != one.file("alice") and other.name != one.name
    path = container_image("/shared/mine.sqsh", "/shared")
    assert (path.uri, path.file("alice")) == (None, "/shared/mine.sqsh")


def test_the_script_imports_the_partition_image_and_starts_steps_from_the_file() -> None:
    script = _render("prod", "gpu-h100")
    image = container_image(IMAGE, "/shared")
    assert f'SLURM_EKS_IMAGE="$(own_directory /shared/images)/{image.name}.sqsh"\n' in script
    assert f'import_image {shlex.quote(image.uri or "")} "${{SLURM_EKS_IMAGE}}"\n' in script
    flags = f'--container-image="${{SLURM_EKS_IMAGE}}" --container-name={image.name} '
    assert f"srun --kill-on-bad-exit=1 {flags}" in script


def test_the_precompile_key_follows_what_shapes_the_graphs() -> None:
    config, _ = load_stack("prod")
    target = target_for_partition(config, "prod", "trainium", image=IMAGE)
    key = precompile_key(target, ENTRY)
    assert key == precompile_key(target, list(ENTRY))
    assert key != precompile_key(target, [*ENTRY, "--fsdp"])
    assert key != precompile_key(dataclasses.replace(target, image="registry.example.com/train:1.1"), ENTRY)
    assert key != precompile_key(dataclasses.replace(target, procs_per_node=64), ENTRY)
    assert f'"{key}"' in render_job(target, ENTRY)


def test_there_is_no_image_to_pull_for_the_host(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match=r"^partition cpu has no image to pull; pass --image IMAGE"):
        render_image_pull(local_target(tmp_path, cpus=2, gpus=2))


# --- Trainium: TorchNeuron where the chips run it, the legacy torch-xla path on trn1 -------------------------------

TORCHNEURON_IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/torchneuron-training:2.14"
XLA_DLC = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04"


def _trn2(image: str | None = TORCHNEURON_IMAGE) -> ClusterConfig:
    raw = raw_config("prod")
    raw["partitions"]["trn2"] = {"instanceTypes": ["trn2.48xlarge"], "maxNodes": 4, "efa": True,
                                 **({"image": image} if image else {})}
    config, _ = parse_cluster_config(raw)
    return config


def test_a_trn2_partition_trains_through_torchneuron_by_default() -> None:
    target = target_for_partition(_trn2(), "prod", "trn2")
    assert target.neuron_runtime == "native" and target.image == TORCHNEURON_IMAGE
    script = render_job(target, ENTRY, nodes=2)
    env = exported(script)
    assert env["SLURM_EKS_DEVICE"] == "neuron"
    # one worker per logical NeuronCore (64 at LNC=2), your own compile cache, no ahead-of-time compile step
    assert "--nproc-per-node=64" in script and "neuron_parallel_compile" not in script
    assert env["TORCH_NEURONX_NEFF_CACHE_DIR"] == '"${TORCH_NEURONX_NEFF_CACHE_DIR:-${OWN_NEURON_CACHE}/neff}"'
    assert "NEURON_CC_FLAGS" not in env and "NEURON_RT_VISIBLE_CORES" not in env
    timeout = TORCHRUN_SHUTDOWN_TIMEOUT_S
    assert env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == f'"${{TORCH_ELASTIC_SHUTDOWN_TIMEOUT:-{timeout}}}"'
    assert libfabric(script) == {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}


def test_the_legacy_xla_path_is_named_and_only_where_it_runs(tmp_path: Path) -> None:
    config = _trn2()
    legacy = target_for_partition(config, "prod", "trn2", image=XLA_DLC)  # an image of the XLA line: its runtime
    assert legacy.neuron_runtime == "xla" and exported(render_job(legacy, ENTRY))["SLURM_EKS_DEVICE"] == "xla"
    asked = target_for_partition(_trn2(None), "prod", "trn2", neuron_runtime="xla")
    assert asked.neuron_runtime == "xla" and asked.image == XLA_DLC  # the pinned legacy image
    shellcheck(render_job(asked, ENTRY), tmp_path)
    with pytest.raises(RenderError, match="TorchNeuron runs on Trainium2 and Trainium3 only"):
        target_for_partition(config, "prod", "trainium", neuron_runtime="native")
    with pytest.raises(RenderError, match="use one of native, xla"):
        target_for_partition(config, "prod", "trn2", neuron_runtime="torch")


def test_torchneuron_without_an_image_says_where_to_set_one() -> None:
    with pytest.raises(RenderError) as caught:
        target_for_partition(_trn2(None), "prod", "trn2")
    assert "Set partitions.trn2.image in stacks/Pulumi.prod.yaml (or pass --image IMAGE)" in str(caught.value)
    assert "'PyTorch Training (TorchNeuron)' DLC of Neuron 2.33" in str(caught.value)


def test_the_native_script_is_shellcheck_clean(tmp_path: Path) -> None:
    shellcheck(render_job(target_for_partition(_trn2(), "prod", "trn2"), ENTRY, nodes=2), tmp_path)
