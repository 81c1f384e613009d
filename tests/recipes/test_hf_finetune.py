"""jobs/recipes/hf_finetune.py under real torchrun (2 CPU workers, gloo) on a tiny Llama: a full fine-tune
and a LoRA one finish with DONE; a stop file preempts with a checkpoint and PREEMPTED, and the resumed run
ends at the same step with the uninterrupted run's weights."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from jobs.recipes.deepspeed_config import zero3_config
from tests.conftest import require_module
from tests.jobs import runs
from tests.jobs.runs import Run, once_at_step
from tests.recipes.conftest import OPS_BUILD_TIMEOUT_S, RECIPE_DEPS

for _name in ("transformers", "peft", "tokenizers"):
    require_module(_name, RECIPE_DEPS)
torch = require_module("torch", RECIPE_DEPS)
safetensors_torch = require_module("safetensors.torch", RECIPE_DEPS)

pytestmark = pytest.mark.torch

RECIPE = runs.REPO / "jobs" / "recipes" / "hf_finetune.py"
STEPS = 12
# 16-token examples, 2 workers x 4 x 2 accumulated = 16 examples a step (about 12 steps an epoch).
TINY = ["--max-seq-length", "16", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2",
        "--learning_rate", "1e-3", "--warmup_ratio", "0.1", "--max_steps", str(STEPS), "--save_steps", "4",
        "--logging_steps", "1", "--stop-check-every", "1"]  # fmt: skip
TIMEOUT_S = 300  # two workers importing transformers take most of a minute on a loaded 2-core machine


EventHook = Callable[[dict[str, object], subprocess.Popen[str]], None]


def recipe(
    model: Path, out: Path, *flags: str, on_event: EventHook | None = None, timeout: float = TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> Run:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(RECIPE),
           "--model_name_or_path", str(model), "--dataset", str(model.parent / "data.jsonl"), *TINY, *flags,
           "--output-dir", str(out), "--stop-file", str(runs.stop_file(out))]  # fmt: skip
    run = runs.launch(cmd, on_event, timeout, env={"HF_HUB_OFFLINE": "1", **(env or {})})
    assert run.rc == 0, run.stderr[-4000:]
    return run


def weights(out: Path) -> dict[str, torch.Tensor]:
    return safetensors_torch.load_file(out / "final" / "model.safetensors")


@cache
def _reference(model: Path, root: Path) -> tuple[Run, Path]:
    out = root / "reference"
    return recipe(model, out), out


@pytest.fixture(scope="module")
def reference(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Run, Path]:
    """An uninterrupted full fine-tune: its events and output directory."""
    return _reference(tiny_llama, tmp_path_factory.mktemp("reference"))


def test_full_finetune_finishes_with_done(reference: tuple[Run, Path]) -> None:
    run, out = reference
    losses = [float(e["loss"]) for e in run.events if "loss" in e]  # type: ignore[arg-type]
    assert len(losses) == STEPS and losses[-1] < losses[0] - 0.2
    assert run.last("done")["step"] == STEPS
    assert json.loads((out / "DONE").read_text()) == {"step": STEPS, "model": str(out / "final")}
    assert not (out / "PREEMPTED").exists()
    # save_total_limit 3 of checkpoints 4, 8, 12, each committed once every rank had written its part
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-12", "checkpoint-4", "checkpoint-8"]
    assert all((p / ".complete").is_file() for p in out.glob("checkpoint-*"))
    assert {"model.safetensors", "tokenizer.json", "config.json"} <= {p.name for p in (out / "final").iterdir()}


def test_lora_trains_only_the_adapters(tiny_llama: Path, tmp_path: Path) -> None:
    out = tmp_path / "lora"
    run = recipe(tiny_llama, out, "--lora-r", "4", "--lora-alpha", "8", "--lora-target-modules", "q_proj,v_proj",
                 "--bf16", "--gradient-checkpointing", "--learning-rate", "1e-2")  # fmt: skip
    assert run.last("done")["step"] == STEPS and (out / "DONE").is_file()
    final = {p.name for p in (out / "final").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json"} <= final and "model.safetensors" not in final
    adapter = safetensors_torch.load_file(out / "final" / "adapter_model.safetensors")
    assert adapter and all("lora_" in name for name in adapter)
    assert {n.split(".")[-3] for n in adapter} == {"q_proj", "v_proj"}  # ...self_attn.q_proj.lora_A.weight
    losses = [float(e["loss"]) for e in run.events if "loss" in e]  # type: ignore[arg-type]
    assert losses[-1] < losses[0]


# A Trainium2 job script's environment, with the CPU stand-in of torch_neuronx (tests/standins): no Neuron device.
NEURON_ENV = {"SLURM_EKS_DEVICE": "neuron", "PYTHONPATH": f"{runs.REPO}:{runs.REPO / 'tests' / 'standins'}"}


def test_on_trainium2_without_a_neuron_device_the_job_stops_rather_than_train_on_the_cpu(
    tiny_llama: Path, tmp_path: Path
) -> None:
    """SLURM_EKS_DEVICE=neuron leaves the device to accelerate (TorchNeuron's, where torch.neuron reports one);
    an image without it stops at once with one line, not a week of CPU training."""
    cmd = [sys.executable, str(RECIPE), "--model_name_or_path", str(tiny_llama), "--dataset",
           str(tiny_llama.parent / "data.jsonl"), "--lora-r", "4", "--output-dir", str(tmp_path)]  # fmt: skip
    run = runs.launch(cmd, timeout=TIMEOUT_S, env={"HF_HUB_OFFLINE": "1", **NEURON_ENV})
    assert run.rc == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert "hf_finetune.py: error: SLURM_EKS_DEVICE=neuron (a Trainium2/3 job script) but no Neuron device" \
        in run.stderr


def test_stop_file_preempts_and_the_resumed_run_matches(
    tiny_llama: Path, tmp_path: Path, reference: tuple[Run, Path]
) -> None:
    out = tmp_path / "preempted"
    first = recipe(tiny_llama, out, on_event=once_at_step(3, lambda _: runs.stop_file(out).touch()))
    stopped = first.last("preempted")
    step = int(stopped["step"])  # type: ignore[call-overload]
    assert 3 <= step < STEPS and stopped["reasons"] == ["stop-file"]
    checkpoint = out / f"checkpoint-{step}"
    assert stopped["checkpoint"] == str(checkpoint) and (checkpoint / ".complete").is_file()
    assert json.loads((out / "PREEMPTED").read_text()) == {
        "step": step, "reasons": ["stop-file"], "checkpoint": str(checkpoint)}
    assert not (out / "DONE").exists() and not (out / "final").exists()

    second = recipe(tiny_llama, out)
    assert second.last("start")["resume_from"] == str(checkpoint)
    assert [e["step"] for e in second.events if "loss" in e] == list(range(step + 1, STEPS + 1))
    assert second.last("done")["step"] == STEPS
    assert json.loads((out / "DONE").read_text())["step"] == STEPS and not (out / "PREEMPTED").exists()
    # Measured on this CPU (2 gloo workers, fp32, attention dropout 0.1): the resumed run's final weights are
    # bit-for-bit the uninterrupted run's (the Trainer restores optimizer, schedule, RNG and data position).
    resumed, uninterrupted = weights(out), weights(reference[1])
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in resumed.items():
        assert torch.equal(tensor, uninterrupted[name]), name


def test_a_preempted_fine_tune_restored_from_s3_resumes_to_the_same_weights(
    tiny_llama: Path, tmp_path: Path, reference: tuple[Run, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint manager with the Trainer's checkpoints: the preempted run's checkpoint-<n> goes to S3 (moto),
    the output directory is lost, the restored checkpoint resumes to the uninterrupted run's weights."""
    from moto import mock_aws

    from jobs.checkpoint_store.location import JobKey, S3Location
    from jobs.checkpoint_store.store import CheckpointStore
    from jobs.checkpoint_store.sync import restore_if_missing, sync_newest

    out = tmp_path / "ft-7"
    first = recipe(tiny_llama, out, on_event=once_at_step(3, lambda _: runs.stop_file(out).touch()))
    step = int(first.last("preempted")["step"])  # type: ignore[call-overload]
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    with mock_aws():
        import boto3

        s3 = boto3.client("s3", region_name="us-west-2")
        s3.create_bucket(Bucket="ml-store", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        store, job = CheckpointStore(s3, S3Location.parse("s3://ml-store/jobs")), JobKey("alice", out.name)
        copied = sync_newest(store, job, out, keep=2, log=lambda _: None)
        assert copied is not None and copied.checkpoint == f"checkpoint-{step}"
        lost = tmp_path / "lost"
        out.rename(lost)  # /shared lost the job's directory
        restored = restore_if_missing(store, job, out, lambda _: None)
    assert restored is not None and (out / f"checkpoint-{step}" / ".complete").is_file()
    runs.stop_file(out).unlink()  # as the job script does before each launch (jobs/templates/base.sbatch.j2)
    second = recipe(tiny_llama, out)
    assert second.last("start")["resume_from"] == str(out / f"checkpoint-{step}"), second.events
    assert second.last("done")["step"] == STEPS, second.events[-3:]
    resumed, uninterrupted = weights(out), weights(reference[1])
    for name, tensor in resumed.items():
        assert torch.equal(tensor, uninterrupted[name]), name


@pytest.mark.timeout(OPS_BUILD_TIMEOUT_S + 2 * TIMEOUT_S)  # the first session here builds DeepSpeed's op
def test_deepspeed_zero3_trains_preempts_and_resumes_on_the_cpu(tiny_llama: Path, tmp_path: Path,
                                                                deepspeed_ops: Path) -> None:
    """The generated ZeRO-3 config through the Trainer: DeepSpeed 0.19.8 runs it on its CPU accelerator over
    gloo, each of the 2 ranks holding a shard of parameters and optimizer state, and the contract holds."""
    require_module("deepspeed", RECIPE_DEPS)
    config = tmp_path / "ds_zero3.json"
    config.write_text(json.dumps(zero3_config(offload=False)))
    out = tmp_path / "zero3"
    flags = ("--bf16", "--deepspeed", str(config), "--max_steps", "6")
    first = recipe(tiny_llama, out, *flags, on_event=once_at_step(2, lambda _: runs.stop_file(out).touch()))
    step = int(first.last("preempted")["step"])  # type: ignore[call-overload]
    assert 2 <= step < 6
    shards = out / f"checkpoint-{step}" / f"global_step{step}"
    assert {p.name for p in shards.iterdir()} == {
        f"{kind}zero_pp_rank_{rank}_mp_rank_00_{what}_states.pt"
        for rank in (0, 1) for kind, what in (("", "model"), ("bf16_", "optim"))}  # fmt: skip

    second = recipe(tiny_llama, out, *flags)
    assert second.last("start")["resume_from"] == str(out / f"checkpoint-{step}")
    assert [e["step"] for e in second.events if "loss" in e] == list(range(step + 1, 7))
    assert json.loads((out / "DONE").read_text())["step"] == 6
    # stage3_gather_16bit_weights_on_model_save: whole bf16 tensors, not the ranks' empty placeholders
    initial = safetensors_torch.load_file(tiny_llama / "model.safetensors")
    final = weights(out)
    assert {k: t.shape for k, t in final.items()} == {k: t.shape for k, t in initial.items()}
    assert {t.dtype for t in final.values()} == {torch.bfloat16}
