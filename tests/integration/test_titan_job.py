"""The torchtitan job advise prints for a mixture-of-experts preset, rendered and run on the real local Slurm 25.11:
sbatch -> srun -> torchrun (the torchtitan venv's: torch 2.13.0, torchtitan 0.3.0) -> jobs/recipes/titan.py, which
resolves the advised layout in torchtitan's config system and builds the model on the meta device (`--dry-run`:
torchtitan's Trainer needs CUDA, tests/recipes/test_titan.py says what only a GPU shows)."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from components.config.stackfile import STACKS_DIR, load_stack
from jobs.render import local_target, render_job
from scripts.advise.hardware import partition_hardware
from scripts.advise.moe import MOE_PRESETS, advise_moe
from slurm import client
from slurm.cli_backend import CliBackend
from slurm.local.config import FAKE_GPUS
from tests.recipes.test_titan import titan_python

pytestmark = [pytest.mark.slurm, pytest.mark.torch]
BACKEND = CliBackend()


def test_the_advised_moe_job_runs_through_slurm_and_torchrun_into_torchtitan(tmp_path: Path) -> None:
    config, _ = load_stack("dev", STACKS_DIR)
    advice = advise_moe(MOE_PRESETS["qwen3-moe-debug"], partition_hardware(config, "dev", "gpu"))
    words = shlex.split(advice.command)
    entry = words[words.index("--") + 1:]
    assert entry[0] == "jobs/recipes/titan.py"
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    target = replace(local_target(state, cpus=os.cpu_count() or 1, gpus=FAKE_GPUS),
                     torchrun=str(Path(titan_python()).parent / "torchrun"))
    script = tmp_path / "moe.sbatch"
    repo = Path(__file__).resolve().parents[2]
    script.write_text(render_job(target, [str(repo / entry[0]), *entry[1:], "--dry-run"], job_name="moe"))
    ckpt = tmp_path / "ckpt"
    job_id = client.submit(script, client.SubmitOptions(
        extra_args=(f"--export=ALL,SLURM_EKS_CHECKPOINT_DIR={ckpt},PYTHONPATH={repo}",)), BACKEND)
    job = client.wait_for(job_id, timeout_s=300, backend=BACKEND)
    log = client.logs(job_id, BACKEND)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), log[-3000:]
    starts = [json.loads(line[line.index("{"):]) for line in log.splitlines() if '"event": "start"' in line]
    assert starts, log[-3000:]
    start = starts[0]
    layout = advice.layout
    assert start["parallelism"]["dp_shard"] == layout.dp_shard and start["parallelism"]["ep"] == layout.ep
    assert start["local_batch_size"] == layout.micro_batch and start["params"] == 315_758_848
    assert start["checkpoint_folder"] == str(ckpt / "checkpoint")
