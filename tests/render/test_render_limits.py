"""Render's numbers and limits, each as the docs state it or as Slurm reads it: restarts, shutdown timeout,
time limits, node counts, checkpoint sizes, process counts, job names and the script's layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.config.cluster import ClusterConfig
from components.config.stackfile import load_stack
from jobs.render import (
    RenderError,
    SignalLead,
    checkpoint_signal_lead,
    enroot_uri,
    local_target,
    precompile_key,
    render_job,
    slurm_time_seconds,
    target_for_partition,
)
from tests.config.helpers import raw_config
from tests.render.test_render import ENTRY, _render

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "jobs.md").read_text()


def _documented(pattern: str) -> str:
    (value,) = set(re.findall(pattern, DOCS))
    return value


def test_torchrun_restarts_workers_as_often_as_docs_jobs_md_says() -> None:
    restarts = _documented(r"`--max-restarts=(\d+)`")
    assert f"--max-restarts={restarts} " in _render("prod", "gpu-h100")


def test_torchrun_gets_the_shutdown_timeout_docs_jobs_md_states() -> None:
    seconds = _documented(r"`TORCH_ELASTIC_SHUTDOWN_TIMEOUT=(\d+)`")
    assert f'TORCH_ELASTIC_SHUTDOWN_TIMEOUT="${{TORCH_ELASTIC_SHUTDOWN_TIMEOUT:-{seconds}}}"' in _render(
        "prod", "gpu-h100")


@pytest.mark.parametrize(("limit", "seconds"), [
    ("1-00:00:30", 86430), ("1-00:01:30", 86490), ("1-2", 93600), ("01:00:30", 3630), ("90", 5400),
    ("2:30", 150), ("01:02:03", 3723), ("0", None),
])
def test_slurm_time_limits_in_seconds(limit: str, seconds: int | None) -> None:
    """sbatch(1) --time: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S."""
    assert slurm_time_seconds(limit) == seconds


def test_zero_nodes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="--nodes must be at least 1, not 0"):
        render_job(local_target(tmp_path, cpus=2, gpus=0), ENTRY, nodes=0)


@pytest.mark.parametrize("size", [0, -5])
def test_a_checkpoint_size_must_be_positive(size: float, tmp_path: Path) -> None:
    with pytest.raises(RenderError, match="is not a size"):
        checkpoint_signal_lead(local_target(tmp_path, cpus=2, gpus=0), size)


def test_a_machine_without_gpus_runs_one_worker(tmp_path: Path) -> None:
    assert local_target(tmp_path, cpus=2, gpus=0).procs_per_node == 1
    assert "--nproc-per-node=1 " in render_job(local_target(tmp_path, cpus=2, gpus=0), ENTRY)


def test_the_job_is_named_after_its_entry_point(tmp_path: Path) -> None:
    target = local_target(tmp_path, cpus=2, gpus=0)
    assert "#SBATCH --job-name=hf_finetune\n" in render_job(target, ["jobs/recipes/hf_finetune.py", "--bf16"])
    assert "#SBATCH --job-name=mine\n" in render_job(target, ["jobs/recipes/hf_finetune.py"], job_name="mine")


def test_the_precompile_key_is_64_bits_of_sha256(tmp_path: Path) -> None:
    """16 hex digits: collisions between two different graph sets are out of reach (2^32 keys for even odds)."""
    assert re.fullmatch(r"[0-9a-f]{16}", precompile_key(local_target(tmp_path, cpus=2, gpus=0), ENTRY))


def test_template_blocks_leave_no_indentation_behind() -> None:
    """Jinja's lstrip_blocks: an indented `{% if %}` line must not leave its spaces in the script."""
    script = _render("prod", "gpu-h100")
    assert [line for line in script.splitlines() if line and not line.strip()] == []


def test_a_one_gpu_partition_runs_one_worker_per_node(tmp_path: Path) -> None:
    raw = raw_config("dev")
    raw["partitions"]["gpu"]["instanceTypes"] = ["g5.xlarge"]
    config = ClusterConfig.model_validate(raw)
    target = target_for_partition(config, "dev", "gpu", image=None)
    assert target.procs_per_node == 1 and "--nproc-per-node=1 " in render_job(target, ENTRY)


def test_one_node_unless_asked(tmp_path: Path) -> None:
    assert "#SBATCH --nodes=1\n" in render_job(local_target(tmp_path, cpus=2, gpus=0), ENTRY)


@pytest.mark.parametrize(("seconds", "time", "refused"), [
    (0, "10", False),  # sbatch(1) --signal: "between 0 and 65535"
    (65535, "2-00:00:00", False),
    (-1, "10", True),
    (65536, "2-00:00:00", True),
    (600, "10", True),  # as long as the limit: asked to stop as it starts
    (599, "10", False),
])
def test_the_signal_lead_is_what_sbatch_takes_and_shorter_than_the_limit(seconds: int, time: str, refused: bool,
                                                                          tmp_path: Path) -> None:
    def render() -> str:
        return render_job(local_target(tmp_path, cpus=2, gpus=0), ENTRY, time=time, lead=SignalLead(seconds))

    if refused:
        with pytest.raises(RenderError, match="signal lead"):
            render()
    else:
        assert f"#SBATCH --signal=B:USR2@{seconds}\n" in render()


def test_the_partition_description_names_devices_and_efa() -> None:
    config, _ = load_stack("prod")
    assert target_for_partition(config, "prod", "gpu-h100").description == \
        "partition gpu-h100: p5.48xlarge, 8 x H100 per node, 32 EFA"
    config, _ = load_stack("dev")
    assert target_for_partition(config, "dev", "gpu").description == \
        "partition gpu: g5.12xlarge, 4 x A10G per node, no EFA"


def test_a_docker_hub_namespace_that_sorts_before_localhost_is_no_registry() -> None:
    """Only the exact name `localhost` is a registry without a dot or colon (Docker's splitDockerDomain)."""
    assert enroot_uri("acme/train:1") == "docker://acme/train:1"
