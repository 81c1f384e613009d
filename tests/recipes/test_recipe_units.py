"""The recipe's pieces in one process: its data files, which checkpoint it resumes from, its flags, the stop
agreement without a process group, and the brief's command rendered into a job script."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from scripts.cli.main import app
from tests.conftest import require_module
from tests.recipes.conftest import RECIPE_DEPS

for _name in ("transformers", "peft", "tokenizers"):
    require_module(_name, RECIPE_DEPS)
torch = require_module("torch", RECIPE_DEPS)

from transformers import AutoTokenizer, TrainerControl, TrainerState  # noqa: E402

from jobs.recipes import hf_finetune  # noqa: E402
from jobs.recipes.hf_checkpoints import COMMIT_MARKER, JobContract, latest_complete_checkpoint, remove_torn  # noqa: E402
from jobs.recipes.lm_data import load_blocks, read_texts  # noqa: E402
from jobs.training.config import CHECKPOINT_DIR_ENV  # noqa: E402
from jobs.training.metrics import JsonLog  # noqa: E402
from jobs.training.preemption import StopRequest  # noqa: E402

pytestmark = pytest.mark.torch


def test_jsonl_documents_become_blocks_joined_by_eos(tiny_llama: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    data = tiny_llama.parent / "data.jsonl"
    blocks = load_blocks(data, 16, tokenizer, 10_000, "text", "uint16")
    docs = tokenizer(read_texts(data, "text"), add_special_tokens=False)["input_ids"]
    stream = [t for doc in docs for t in [*doc, tokenizer.eos_token_id]]
    assert len(blocks) == len(stream) // 16
    example = blocks[1]
    assert example["input_ids"].tolist() == stream[16:32] and torch.equal(example["labels"], example["input_ids"])


def test_text_files_hold_a_document_a_line_and_jsonl_names_its_field(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one doc\n\nanother doc\n")
    assert read_texts(tmp_path / "a.txt", "text") == ["one doc", "another doc"]
    (tmp_path / "b.jsonl").write_text('{"body": "x"}\n\n{"body": "y", "id": 2}\n')
    assert read_texts(tmp_path / "b.jsonl", "body") == ["x", "y"]
    with pytest.raises(ValueError, match=r"b.jsonl:1: no string field 'text' \(give the field with --text-field\)"):
        read_texts(tmp_path / "b.jsonl", "text")


def test_a_token_file_is_cut_into_blocks_and_checked_against_the_vocabulary(tmp_path: Path) -> None:
    path = tmp_path / "tokens.bin"
    torch.arange(50, dtype=torch.int32).to(torch.uint16).numpy().tofile(path)
    blocks = load_blocks(path, 16, None, 64, "text", "uint16")
    firsts = sorted(int(blocks[i]["input_ids"][0]) for i in range(len(blocks)))
    assert firsts == [0, 16, 32]  # every 16-token window once (TokenFile's own seeded order)
    assert all(torch.equal(blocks[i]["input_ids"].diff(), torch.ones(15, dtype=torch.long)) for i in range(3))
    too_small = load_blocks(path, 16, None, 40, "text", "uint16")
    with pytest.raises(ValueError, match="is >= --vocab-size 40"):
        [too_small[i] for i in range(3)]


def test_unknown_files_and_short_corpora_are_refused(tiny_llama: Path, tmp_path: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama)
    with pytest.raises(ValueError, match=r"give a .jsonl, .txt or .bin"):
        load_blocks(tmp_path / "data.parquet", 16, tokenizer, 100, "text", "uint16")
    (tmp_path / "short.txt").write_text("the fox\n")
    with pytest.raises(ValueError, match="less than one block of --max-seq-length 64"):
        load_blocks(tmp_path / "short.txt", 64, tokenizer, 100, "text", "uint16")


def _checkpoint(root: Path, step: int, complete: bool) -> Path:
    path = root / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if complete:
        (path / COMMIT_MARKER).touch()
    return path


def test_resume_picks_the_newest_complete_checkpoint_and_torn_ones_are_removed(tmp_path: Path) -> None:
    assert latest_complete_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 5, True)
    newest = _checkpoint(tmp_path, 20, True)
    torn = _checkpoint(tmp_path, 30, False)
    _checkpoint(tmp_path, 100, False)
    (tmp_path / "checkpoint-notes").mkdir()
    assert latest_complete_checkpoint(tmp_path) == newest  # 20 > 5 by number, not by name
    assert remove_torn(tmp_path) == [torn, tmp_path / "checkpoint-100"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-20", "checkpoint-5", "checkpoint-notes"]


def _args(tiny_llama: Path, *extra: str) -> list[str]:
    return ["--model_name_or_path", str(tiny_llama), "--dataset", "x.jsonl", *extra]


def test_the_output_dir_defaults_to_the_job_scripts_checkpoint_dir(
    tiny_llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CHECKPOINT_DIR_ENV, str(tmp_path))
    ns = hf_finetune.parse_args(_args(tiny_llama, "--per_device_train_batch_size", "2", "--lora-r", "8"))
    assert ns.output_dir == tmp_path and ns.per_device_train_batch_size == 2 and ns.lora_r == 8
    assert hf_finetune.parse_args(_args(tiny_llama, "--output_dir", str(tmp_path))).output_dir == tmp_path


@pytest.mark.parametrize(
    ("extra", "env", "message"),
    [
        ([], None, "give --output-dir, or set $SLURM_EKS_CHECKPOINT_DIR"),
        (["--output-dir", "/elsewhere"], "/shared/checkpoints/job", "where the job script looks for DONE"),
        (["--output-dir", "/o", "--save-total-limit", "1"], None, "must be >= 2, got 1"),
        (["--output-dir", "/o", "--warmup-ratio", "1.5"], None, "must be in [0, 1), got 1.5"),
    ],
)
def test_flags_the_contract_cannot_work_with_are_refused(
    tiny_llama: Path, extra: list[str], env: str | None, message: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.delenv(CHECKPOINT_DIR_ENV, raising=False)
    if env:
        monkeypatch.setenv(CHECKPOINT_DIR_ENV, env)
    with pytest.raises(SystemExit):
        hf_finetune.parse_args(_args(tiny_llama, *extra))
    assert message in capsys.readouterr().err


def test_a_hub_model_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        hf_finetune.parse_args(["--model_name_or_path", "meta-llama/Llama-3-70B", "--dataset", "x.jsonl",
                                "--output-dir", str(tmp_path)])  # fmt: skip
    assert "is not a directory: the recipe loads a local model only" in capsys.readouterr().err


def _state(step: int) -> TrainerState:
    state = TrainerState()
    state.global_step = step
    return state


def test_without_a_process_group_the_stop_file_stops_after_a_checkpoint(tmp_path: Path) -> None:
    """`python hf_finetune.py` without torchrun: one process, no group; the stop check still works."""
    stop_file = tmp_path / "STOP"
    contract = JobContract(StopRequest(stop_file, poll_file=True), every=2, log=JsonLog(False))
    args: Any = SimpleNamespace(process_index=0, local_process_index=0, world_size=1, device=torch.device("cpu"),
                                output_dir=str(tmp_path))  # fmt: skip
    control = TrainerControl()
    contract.on_train_begin(args, _state(0), control)
    stop_file.touch()
    contract.on_step_end(args, _state(1), control)  # not a check step
    assert not control.should_save and not contract.reasons
    contract.on_step_end(args, _state(2), control)
    assert contract.reasons == ["stop-file"] and control.should_save and control.should_training_stop
    (tmp_path / "checkpoint-2").mkdir()
    contract.on_save(args, _state(2), control)
    assert (tmp_path / "checkpoint-2" / COMMIT_MARKER).is_file()
    assert contract.last_checkpoint == tmp_path / "checkpoint-2"


def test_the_briefs_command_renders_into_a_job_script() -> None:
    """The brief's sbatch line, as `job render` takes it: the recipe is just another entry point. The script's
    own checkpoint directory is per user and job, so the brief's --output_dir is given to sbatch as
    SLURM_EKS_CHECKPOINT_DIR, which the script then uses as it is."""
    brief = ["jobs/recipes/hf_finetune.py", "--model_name_or_path", "/shared/models/llama3-70b",
             "--dataset_path", "/shared/data/finetune.jsonl", "--output_dir", "/shared/checkpoints/llama3-finetuned",
             "--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "8", "--learning_rate", "2e-5",
             "--num_train_epochs", "3", "--bf16", "--deepspeed", "configs/ds_config_zero3.json"]  # fmt: skip
    result = CliRunner().invoke(app, ["job", "render", "-s", "prod", "-p", "gpu-a100", "-N", "4", "-J",
                                      "llama3-finetuned", "--", *brief], env={"NO_COLOR": "1"})  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "#SBATCH --job-name=llama3-finetuned" in result.output
    assert 'if [[ -z "${SLURM_EKS_CHECKPOINT_DIR:-}" ]]; then' in result.output
    assert 'SLURM_EKS_CHECKPOINT_DIR="${OWN_CHECKPOINTS}/${SLURM_JOB_NAME//\\//_}-${SLURM_JOB_ID}"' in result.output
    assert " ".join(brief) in result.output
    ns = hf_finetune.build_parser().parse_args(brief[1:])  # the recipe takes the brief's flags as written
    assert (ns.dataset, ns.num_train_epochs, ns.bf16, ns.deepspeed) == (
        Path("/shared/data/finetune.jsonl"), 3.0, True, Path("configs/ds_config_zero3.json"))
