"""jobs/recipes/titan.py against torchtitan 0.3.0 itself, on the CPU, in the torchtitan venv (`make titan-venv`:
torch 2.13.0, the torch of the PyTorch 2.13 DLC the recipe runs in): each mixture-of-experts preset of
scripts/advise/moe.py is the model torchtitan builds from its module and config (parameters counted on the meta
device); the flags advise prints resolve in torchtitan's own config system to the layout advised, with the job's
directory for checkpoints; the recipe's hooks meet the torchtitan Trainer and CheckpointManager they replace or
call. What only a GPU shows: torchtitan's Trainer itself (it sets a CUDA device at construction: measured,
"module 'torch._C' has no attribute '_cuda_setDevice'" on this CPU build), training steps, the all-to-all of
expert parallelism, and a checkpoint saved on a stop and loaded on the requeue (benchmarks/bench_gpu.py runs a
step and a stop when a GPU machine is lent)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

from scripts.advise.moe import MOE_PRESETS, MoeLayout, MoePreset, titan_flags
from tests.conftest import unavailable

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "jobs" / "recipes" / "titan.py"
TITAN_VENV = Path(os.environ.get("SLURM_EKS_TITAN_VENV", REPO / ".venv-titan"))


def titan_python() -> str:
    python = TITAN_VENV / "bin" / "python"
    if not python.is_file():
        unavailable(f"{python} is missing: `make titan-venv` builds the torchtitan venv (make test does)")
    return str(python)


def run_titan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([titan_python(), *args], capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def preset_differences(preset: MoePreset, built: dict[str, object]) -> list[str]:
    """Where a preset says other than what torchtitan built."""
    ours = {**dataclasses.asdict(preset.shape), "flavor": preset.flavor, "checkpointing": preset.checkpointing,
            "seq_len": preset.seq_len}
    return [f"{key}: preset {value}, torchtitan {built.get(key)}" for key, value in ours.items()
            if built.get(key) != value]


@pytest.fixture(scope="module")
def built() -> dict[str, dict[str, object]]:
    pairs = [f"{p.module}/{p.config}" for p in MOE_PRESETS.values()]
    done = run_titan(str(REPO / "tests" / "recipes" / "titan_models.py"), *pairs)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {line["preset"]: line for line in lines}


@pytest.mark.parametrize("name", list(MOE_PRESETS))
def test_each_preset_is_the_model_torchtitan_builds(name: str, built: dict[str, dict[str, object]]) -> None:
    preset = MOE_PRESETS[name]
    assert preset_differences(preset, built[f"{preset.module}/{preset.config}"]) == []


def test_a_preset_apart_from_torchtitan_is_named(built: dict[str, dict[str, object]]) -> None:
    preset = MOE_PRESETS["qwen3-30b-a3b"]
    wrong = dataclasses.replace(preset, shape=dataclasses.replace(preset.shape, top_k=4), checkpointing="selective")
    assert preset_differences(wrong, built["qwen3/qwen3_30b_a3b"]) == [
        "top_k: preset 4, torchtitan 8", "checkpointing: preset selective, torchtitan full"]


def dry_run(flags: list[str], job_dir: Path) -> dict[str, object]:
    done = run_titan(str(RECIPE), *flags, "--dry-run", env={"SLURM_EKS_CHECKPOINT_DIR": str(job_dir)})
    assert done.returncode == 0, done.stderr[-3000:]
    (start,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return start


def test_the_advised_flags_resolve_to_the_advised_layout(tmp_path: Path) -> None:
    preset = MOE_PRESETS["deepseek-v3-671b"]
    layout = MoeLayout(nodes=31, dp_shard=248, ep=8, micro_batch=1, grad_accum=4, full_checkpointing=True)
    start = dry_run(titan_flags(preset, layout, 4096, 992), tmp_path)
    assert start["event"] == "start" and (start["model"], start["flavor"]) == ("deepseek_v3", "671B")
    assert start["parallelism"] == {"dp_replicate": 1, "dp_shard": 248, "tp": 1, "pp": 1, "cp": 1, "ep": 8}
    assert (start["seq_len"], start["local_batch_size"]) == (4096, 1)
    assert start["activation_checkpoint"] == "FullAC"  # the subcommand at the end took
    assert start["checkpoint_folder"] == str(tmp_path / "checkpoint") and start["checkpoint_enabled"] is True
    assert (start["params"], start["active_params"]) == (preset.shape.params, preset.shape.active_params)


def test_the_job_directory_is_the_only_checkpoint_directory(tmp_path: Path) -> None:
    flags = ["--module", "qwen3", "--config", "qwen3_moe_debug"]
    elsewhere = run_titan(str(RECIPE), *flags, "--dump_folder", "/tmp/elsewhere", "--dry-run",
                          env={"SLURM_EKS_CHECKPOINT_DIR": str(tmp_path)})
    assert elsewhere.returncode != 0
    assert f"--dump_folder /tmp/elsewhere: the job script reads the run's markers from {tmp_path}" in elsewhere.stderr
    unset = run_titan(str(RECIPE), *flags, "--dry-run", env={"SLURM_EKS_CHECKPOINT_DIR": ""})
    assert unset.returncode != 0 and "$SLURM_EKS_CHECKPOINT_DIR is not set" in unset.stderr
    same = dry_run([*flags, "--dump_folder", str(tmp_path), "--checkpoint.folder", "ckpt"], tmp_path)
    assert same["checkpoint_folder"] == str(tmp_path / "ckpt")


SEAMS = """
import inspect
from torchtitan.trainer import Trainer
from torchtitan.components.checkpointer.dcp import CheckpointManager
train = inspect.getsource(Trainer.train)
assert "while self.should_continue_training():" in train, "the loop no longer asks should_continue_training"
assert "self.checkpointer.save(" in train
should_save = inspect.getsource(CheckpointManager._should_save)
assert "curr_step % self.interval == 0" in should_save, "a save is no longer due when the interval divides the step"
init = inspect.getsource(CheckpointManager.__init__)
assert "self.folder =" in init and "self.interval = config.interval" in init
assert callable(CheckpointManager.save) and callable(CheckpointManager.maybe_wait_for_saving)
assert 'f"step-{step}"' in inspect.getsource(CheckpointManager._create_checkpoint_id)
print("seams hold")
"""


def test_the_recipe_meets_the_trainer_and_checkpointer_it_hooks() -> None:
    done = run_titan("-c", SEAMS)
    assert done.returncode == 0 and done.stdout.strip() == "seams hold", done.stderr[-2000:]


ASSETS = """
import json, sys
from pathlib import Path
from benchmarks.bench_titan import metrics, write_assets
from torchtitan.components.tokenizer import HuggingFaceTokenizer
from torchtitan.hf_datasets.text_datasets import DATASETS
from torchtitan.tools.utils import Color
tokenizer_dir, dataset_dir = write_assets(Path(sys.argv[1]), lines=300)
tokenizer = HuggingFaceTokenizer(tokenizer_path=str(tokenizer_dir))
ids = tokenizer.encode("expert router token", add_bos=True, add_eos=True)
rows = DATASETS["c4_test"].loader(str(dataset_dir))
c = Color()
line = (f"{c.red}step: 12  {c.green}loss:  7.12345  {c.orange}grad_norm:  1.2345  {c.turquoise}memory: 12.34GiB"
        f"(15.00%)  {c.blue}tps: 45,678  {c.cyan}tflops: 1.00  {c.magenta}mfu: N/A{c.reset}")
print(json.dumps({"ids": ids, "vocab": tokenizer.get_vocab_size(), "rows": len(rows), "bos": tokenizer.bos_id,
                  "word": DATASETS["c4_test"].sample_processor(rows[0]).split()[0], "metrics": metrics(line)}))
"""


def test_the_gpu_benchmarks_assets_are_what_torchtitan_reads(tmp_path: Path) -> None:
    # benchmarks/bench_titan.py writes the tokenizer and dataset torchtitan's debug configs read from its source tree
    done = run_titan("-c", ASSETS, str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["vocab"] <= 2048 and max(got["ids"]) < got["vocab"] and got["ids"][0] == got["bos"]
    assert got["rows"] == 300 and got["word"] in {"expert", "router", "token", "layer", "shard", "gradient", "node",
                                                  "slurm", "train", "batch", "mesh"}
    assert got["metrics"] == [{"step": 12, "loss": 7.12345, "memory_gib": 12.34, "tps": 45678.0}]
