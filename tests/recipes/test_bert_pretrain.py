"""jobs/recipes/bert_pretrain.py under real torchrun (2 CPU workers) on a tiny BERT and HDF5 shards in the Neuron
tutorial's format: masked LM + next-sentence prediction train, a stop file preempts with a checkpoint, the resumed
run ends with the uninterrupted run's weights; on the Neuron code path (SLURM_EKS_DEVICE=neuron with the
torch_neuronx stand-in) it runs as a Trainium2 job script would start it. Bad shards get an error naming the file."""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import require_module
from tests.jobs import runs
from tests.jobs.runs import Run, once_at_step
from tests.recipes.conftest import RECIPE_DEPS

for _name in ("transformers", "h5py"):
    require_module(_name, RECIPE_DEPS)
torch = require_module("torch", RECIPE_DEPS)
safetensors_torch = require_module("safetensors.torch", RECIPE_DEPS)

from tests.recipes.bert_shards import MAX_PRED, SEQ, write_config, write_shards  # noqa: E402 - after the checks

pytestmark = pytest.mark.torch

RECIPE = runs.REPO / "jobs" / "recipes" / "bert_pretrain.py"
STEPS = 10
FLAGS = ["--max-pred-length", str(MAX_PRED), "--batch-size", "4", "--grad-accum", "2", "--lr", "2e-3",
         "--warmup-steps", "2", "--max-steps", str(STEPS), "--save-steps", "4", "--logging-steps", "1",
         "--stop-check-every", "1"]  # fmt: skip
STANDINS = runs.REPO / "tests" / "standins"


@cache
def _inputs(root: Path) -> tuple[Path, Path]:
    return write_config(root / "config"), write_shards(root / "shards")


def pretrain(root: Path, out: Path, *flags: str, env: dict[str, str] | None = None, **kwargs: object) -> Run:
    config, shards = _inputs(root)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(RECIPE),
           "--data", str(shards), "--config", str(config), *FLAGS, *flags, "--output-dir", str(out),
           "--stop-file", str(runs.stop_file(out))]  # fmt: skip
    run = runs.launch(cmd, timeout=300, env={"HF_HUB_OFFLINE": "1", **(env or {})}, **kwargs)  # type: ignore[arg-type]
    assert run.rc == 0, run.stderr[-4000:]
    return run


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bert")


@pytest.fixture(scope="module")
def reference(root: Path) -> tuple[Run, Path]:
    out = root / "reference"
    return pretrain(root, out), out


def test_masked_lm_and_next_sentence_pretraining_finishes_with_done(reference: tuple[Run, Path]) -> None:
    run, out = reference
    start = run.last("start")
    assert (start["seq_len"], start["layers"], start["hidden"], start["examples"]) == (SEQ, 2, 32, 128)
    losses = [float(e["loss"]) for e in run.events if "loss" in e]  # type: ignore[arg-type]
    assert len(losses) == STEPS and losses[-1] < losses[0]
    assert json.loads((out / "DONE").read_text()) == {"step": STEPS, "model": str(out / "final")}
    assert (out / "final" / "model.safetensors").is_file()


def test_a_stop_checkpoints_and_the_resumed_run_ends_with_the_uninterrupted_weights(
    root: Path, tmp_path: Path, reference: tuple[Run, Path]
) -> None:
    out = tmp_path / "preempted"
    first = pretrain(root, out, on_event=once_at_step(3, lambda _: runs.stop_file(out).touch()))
    step = int(first.last("preempted")["step"])  # type: ignore[call-overload]
    assert 3 <= step < STEPS and (out / f"checkpoint-{step}" / ".complete").is_file()
    second = pretrain(root, out)
    assert second.last("start")["resume_from"] == str(out / f"checkpoint-{step}")
    assert second.last("done")["step"] == STEPS
    resumed = safetensors_torch.load_file(out / "final" / "model.safetensors")
    uninterrupted = safetensors_torch.load_file(reference[1] / "final" / "model.safetensors")
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in resumed.items():
        assert torch.equal(tensor, uninterrupted[name]), name


def test_on_trainium2_without_a_neuron_device_the_job_stops_with_one_line(root: Path, tmp_path: Path) -> None:
    config, shards = _inputs(root)
    cmd = [sys.executable, str(RECIPE), "--data", str(shards), "--config", str(config), *FLAGS,
           "--output-dir", str(tmp_path)]  # fmt: skip
    run = runs.launch(cmd, timeout=300, env={"HF_HUB_OFFLINE": "1", "SLURM_EKS_DEVICE": "neuron",
                                             "PYTHONPATH": f"{runs.REPO}:{STANDINS}"})  # fmt: skip
    assert run.rc == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "bert_pretrain.py: error: SLURM_EKS_DEVICE=neuron (a Trainium2/3 job script) but no Neuron device" \
        in run.stderr


def test_where_accelerate_sees_a_neuron_device_the_trainer_is_not_pinned_to_the_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import accelerate.utils

    from jobs.recipes.hf_job import use_cpu

    monkeypatch.setenv("SLURM_EKS_DEVICE", "neuron")
    monkeypatch.setattr(accelerate.utils, "is_neuron_available", lambda: True)
    assert use_cpu() is False
    monkeypatch.delenv("SLURM_EKS_DEVICE")
    assert use_cpu() is not torch.cuda.is_available()


def test_shards_in_another_format_are_refused_with_the_file_and_the_fix(tmp_path: Path) -> None:
    from jobs.recipes.bert_data import DataError, PretrainingShards

    with pytest.raises(DataError, match=r"shard_00.hdf5: no next_sentence_labels"):
        PretrainingShards(write_shards(tmp_path / "a", drop="next_sentence_labels"), MAX_PRED, 64)
    with pytest.raises(DataError, match=r"masked_lm_positions is \(64, 3\), not \(64, 20\): give --max-pred-length 3"):
        PretrainingShards(write_shards(tmp_path / "b"), 20, 64)
    with pytest.raises(DataError, match="beyond the model's vocabulary of 30"):
        PretrainingShards(write_shards(tmp_path / "c"), MAX_PRED, 30)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no HDF5 shards"):
        PretrainingShards(tmp_path / "empty", MAX_PRED, 64)


def test_an_example_labels_only_its_masked_tokens(tmp_path: Path) -> None:
    from jobs.recipes.bert_data import IGNORE, PretrainingShards

    data = PretrainingShards(write_shards(tmp_path / "d", shards=1, sequences=4), MAX_PRED, 64)
    example = data[1]  # 3 masked positions
    masked = (example["labels"] != IGNORE).nonzero().flatten().tolist()
    assert len(masked) == 3 and all(example["input_ids"][p] == 3 for p in masked)
    assert int(example["next_sentence_label"]) == 1 and example["token_type_ids"][-1] == 1
