"""jobs/evaluate.py on real checkpoints: a jobs/train.py run's (perplexity, the loaded weights proven to be the
run's by its own parameter digest), a Hugging Face model's through lm-evaluation-harness, and the registry: a
real MLflow server given the run, its metrics and a model version with the lineage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from jobs.evaluation.perplexity import load_model
from jobs.training.config import parse_args
from jobs.training.metrics import params_sha256
from tests.conftest import REPO
from tests.evaluation.conftest import SHAPE, copy_job
from tests.render.standins import free_port

EVALUATE = REPO / "jobs" / "evaluate.py"


def evaluate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EVALUATE), *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})  # fmt: skip


def events(stdout: str) -> dict[str, dict]:
    return {e["event"]: e for e in (json.loads(line) for line in stdout.splitlines() if line.startswith("{"))}


def test_the_loaded_weights_are_the_runs_own(trained: tuple[Path, Path, str]) -> None:
    job, _, digest = trained
    model = load_model(job / "step-12", parse_args([*SHAPE, "--device", "cpu"]).model, torch.device("cpu"))
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        assert params_sha256(model) == digest  # the digest train.py printed for its final parameters
    finally:
        dist.destroy_process_group()


def test_perplexity_goes_beside_the_newest_checkpoint(trained: tuple[Path, Path, str], tmp_path: Path) -> None:
    job = copy_job(trained[0], tmp_path)
    done = evaluate("--checkpoint", str(job), "--", *SHAPE)
    assert done.returncode == 0, done.stderr
    result = json.loads((job / "step-12.eval.json").read_text())
    assert result["step"] == 12 and result["checkpoint"] == str(job / "step-12")
    assert result["metrics"]["perplexity"] == pytest.approx(2.718281828 ** result["metrics"]["loss"], rel=1e-9)
    assert result["details"]["windows"] == 64 and result["lineage"]["code_commit"]  # this checkout's commit

    earlier = evaluate("--checkpoint", str(job / "step-6"), "--", *SHAPE)
    assert earlier.returncode == 0, earlier.stderr
    six = json.loads((job / "step-6.eval.json").read_text())["metrics"]["loss"]
    assert six != result["metrics"]["loss"]  # another checkpoint, other weights, another loss


@pytest.mark.parametrize(("args", "message"), [
    (["--", "--d-model", "64", "--n-heads", "2", "--n-layers", "2", "--seq-len", "16", "--vocab-size", "64"],
     "does not hold this model's weights"),
    (["--eval-data", "/nonexistent.bin", "--", *SHAPE], "--eval-data /nonexistent.bin"),
])  # fmt: skip
def test_a_checkpoint_that_cannot_be_evaluated_is_one_line(trained: tuple[Path, Path, str], args: list[str],
                                                           message: str) -> None:  # fmt: skip
    done = evaluate("--checkpoint", str(trained[0] / "step-12"), *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_directory_without_checkpoints_is_refused(tmp_path: Path) -> None:
    done = evaluate("--checkpoint", str(tmp_path), "--", *SHAPE)
    assert done.returncode == 2 and "has no complete checkpoint" in done.stderr


def test_registered_with_its_lineage_and_the_training_losses(trained: tuple[Path, Path, str], tmp_path: Path,
                                                             mlflow_server: str) -> None:  # fmt: skip
    from mlflow import MlflowClient

    job = copy_job(trained[0], tmp_path)
    done = evaluate("--checkpoint", str(job), "--training-log", str(trained[1]), "--registry-uri", mlflow_server,
                    "--registered-model", "tiny", "--job-id", "7", "--stack", "dev", "--", *SHAPE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    registered = events(done.stdout)["registered"]
    client = MlflowClient(tracking_uri=mlflow_server)
    version = client.get_model_version("tiny", registered["version"])
    assert version.source == f"runs:/{registered['run_id']}/checkpoint"
    assert version.tags["slurm_eks.job_id"] == "7" and version.tags["slurm_eks.stack"] == "dev"
    assert version.tags["slurm_eks.data"] == "synthetic" and len(version.tags["slurm_eks.code_commit"]) == 40
    run = client.get_run(registered["run_id"])
    evaluated = json.loads((job / "step-12.eval.json").read_text())
    assert run.data.metrics["eval/perplexity"] == pytest.approx(evaluated["metrics"]["perplexity"])
    losses = client.get_metric_history(run.info.run_id, "train/loss")
    assert [m.step for m in losses] == list(range(1, 13))  # every step the training log printed
    pointer = client.download_artifacts(run.info.run_id, "checkpoint/location.json", str(tmp_path / "dl"))
    assert json.loads(Path(pointer).read_text())["path"] == str(job / "step-12")


def test_a_checkpoint_in_the_store_is_the_versions_source(trained: tuple[Path, Path, str], tmp_path: Path,
                                                          mlflow_server: str) -> None:  # fmt: skip
    from mlflow import MlflowClient

    job = copy_job(trained[0], tmp_path)
    done = evaluate("--checkpoint", str(job), "--registry-uri", mlflow_server, "--registered-model", "tiny",
                    "--checkpoint-uri", "s3://ml-checkpoints/store/alice/tiny-7", "--", *SHAPE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    registered = events(done.stdout)["registered"]
    version = MlflowClient(tracking_uri=mlflow_server).get_model_version("tiny", registered["version"])
    assert version.source == "s3://ml-checkpoints/store/alice/tiny-7/step-12"


def test_an_unreachable_registry_is_one_line_and_keeps_the_metrics(trained: tuple[Path, Path, str],
                                                                   tmp_path: Path) -> None:  # fmt: skip
    job = copy_job(trained[0], tmp_path)
    done = evaluate("--checkpoint", str(job), "--registry-uri", f"http://127.0.0.1:{free_port()}", "--", *SHAPE,
                    env={"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"})  # fmt: skip
    assert done.returncode == 1 and "registering tiny at http://127.0.0.1" in done.stderr, done.stderr
    assert (job / "step-12.eval.json").is_file()


def test_the_harness_evaluates_a_hugging_face_model_on_held_out_text(tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    words = ["alpha", "beta", "gamma", "delta", "[UNK]", "</s>"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    model_dir = tmp_path / "hf"
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="</s>").save_pretrained(model_dir)
    config = LlamaConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                         eos_token_id=5, bos_token_id=5)  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(model_dir)
    text = tmp_path / "heldout.jsonl"
    text.write_text("".join(json.dumps({"text": "alpha beta gamma delta " * (i + 1)}) + "\n" for i in range(3)))

    done = evaluate("--hf-model", str(model_dir), "--heldout-text", str(text), "--device", "cpu",
                    "--out", str(tmp_path / "hf.eval.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = json.loads((tmp_path / "hf.eval.json").read_text())["metrics"]
    assert set(metrics) >= {"slurm_eks_heldout/word_perplexity", "slurm_eks_heldout/byte_perplexity",
                            "slurm_eks_heldout/bits_per_byte"}  # fmt: skip
    assert metrics["slurm_eks_heldout/word_perplexity"] > 1

    unknown = evaluate("--hf-model", str(model_dir), "--tasks", "no_such_task", "--device", "cpu")
    assert unknown.returncode == 2 and "unknown lm-eval task(s) no_such_task" in unknown.stderr, unknown.stderr[-2000:]
