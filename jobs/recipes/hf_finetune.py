"""Fine-tune a causal LM with the Hugging Face Trainer under torchrun, on the job scripts' checkpoint contract:
`torchrun ... jobs/recipes/hf_finetune.py --model_name_or_path DIR --dataset FILE [flags]` (`--help` lists them).

The brief's recipe: a local model directory (nothing downloads), bf16, gradient accumulation, gradient
checkpointing, warmup + cosine schedule, optional LoRA (peft), optional DeepSpeed (`--deepspeed FILE`, e.g.
from `slurm-eks job deepspeed-config`). Flags take the Trainer's underscore spelling too
(`--per_device_train_batch_size`), so the brief's command line runs as written.

The contract is jobs/train.py's (read its docstring), with the Trainer's checkpoints:

* Checkpoints go to `<output-dir>/checkpoint-<step>/` (`--output-dir` defaults to `$SLURM_EKS_CHECKPOINT_DIR`,
  which the rendered scripts set) every `--save-steps` optimizer steps; one is complete once rank 0 has
  written `.complete` into it after every rank finished its part. On start the run resumes from the
  newest complete one (the Trainer's `resume_from_checkpoint`: weights or adapter, optimizer, scheduler,
  RNG states, data position).
* Stop requests: SIGUSR2 or SIGTERM to a worker, or the stop file (`--stop-file`, default
  `$SLURM_EKS_STOP_FILE`, polled by local rank 0 of each node). Every `--stop-check-every` optimizer steps
  (default 1: a fine-tune step is long, and the check is a CPU all_reduce on a gloo group of its own) the
  ranks agree; on a stop the Trainer saves a checkpoint and stops, rank 0 writes `<output-dir>/PREEMPTED`
  (JSON: step, reasons, checkpoint) and every worker exits 0.
* A finished run saves the model (the LoRA adapter with `--lora-r`) and tokenizer to `<output-dir>/final/`
  and writes `<output-dir>/DONE` (JSON: step, model). Both markers and the stop file are deleted at start.
* Rank 0 prints JSON lines: `start`, the Trainer's logs with their step, `checkpoint`, and last `done` or
  `preempted`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script (torchrun jobs/recipes/hf_finetune.py): make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    TrainingArguments,
    default_data_collator,
    set_seed,
)

from jobs.recipes.hf_job import HfJob, check_contract, contract_arguments, device_arguments
from jobs.recipes.lm_data import TOKEN_SUFFIX, load_blocks
from jobs.training.cadence import RECIPE_STOP_CHECK_EVERY
from jobs.training.config import CHECKPOINT_DIR_ENV, STOP_FILE_ENV


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {value}")
    return value


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hf_finetune.py",
        description="Hugging Face Trainer fine-tune (LoRA, DeepSpeed) on the job scripts' checkpoint contract.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )

    def flag(name: str, *aliases: str, **kw: Any) -> None:  # --a-b, and the Trainer's spelling --a_b
        p.add_argument(*dict.fromkeys([f"--{name}", f"--{name.replace('-', '_')}", *aliases]), **kw)

    flag("model-name-or-path", type=Path, required=True, help="local model directory (config, weights, tokenizer)")
    flag("dataset", "--dataset_path", type=Path, required=True,
         help=f".jsonl (one JSON object with a text field per line), .txt (a document per line) or {TOKEN_SUFFIX} "
              "(flat token ids, as jobs/train.py --data reads)")  # fmt: skip
    flag("text-field", default="text", help="the field of each .jsonl line to train on")
    flag("data-dtype", choices=["uint16", "uint32"], default="uint16", help=f"the ids' type in a {TOKEN_SUFFIX} file")
    flag("max-seq-length", type=_at_least(2), default=1024, help="tokens per example")
    flag("output-dir", type=Path, default=os.environ.get(CHECKPOINT_DIR_ENV),
         help=f"checkpoints, markers, final model (default ${CHECKPOINT_DIR_ENV})")  # fmt: skip
    flag("stop-file", type=Path, default=os.environ.get(STOP_FILE_ENV), help=f"default ${STOP_FILE_ENV}")
    flag("stop-check-every", type=_at_least(1), default=RECIPE_STOP_CHECK_EVERY,
         help="optimizer steps between stop agreements")
    flag("per-device-train-batch-size", type=_at_least(1), default=1)
    flag("gradient-accumulation-steps", type=_at_least(1), default=1)
    flag("learning-rate", type=float, default=2e-5)
    flag("weight-decay", type=float, default=0.0)
    flag("max-grad-norm", type=float, default=1.0)
    flag("num-train-epochs", type=float, default=1.0)
    flag("max-steps", type=int, default=-1, help="optimizer steps; overrides --num-train-epochs when > 0")
    flag("warmup-ratio", type=_fraction, default=0.03, help="share of the steps with a linear warmup; cosine after")
    flag("bf16", action="store_true", help="bf16 mixed precision (DeepSpeed: its config must enable bf16 too)")
    flag("gradient-checkpointing", action="store_true", help="recompute activations in backward")
    flag("save-steps", type=_at_least(1), default=500, help="optimizer steps between checkpoints")
    flag("save-total-limit", type=_at_least(2), default=3,
         help="checkpoints kept (the newest may be in progress, so at least 2)")  # fmt: skip
    flag("logging-steps", type=_at_least(1), default=10)
    flag("seed", type=int, default=42)
    flag("lora-r", type=_at_least(0), default=0, help="LoRA rank; 0 trains every weight")
    flag("lora-alpha", type=int, default=16)
    flag("lora-dropout", type=float, default=0.05)
    flag("lora-target-modules", default="q_proj,k_proj,v_proj,o_proj", help="comma-separated module names")
    flag("deepspeed", type=Path, default=None, help="DeepSpeed config JSON (`slurm-eks job deepspeed-config`)")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    ns = parser.parse_args(argv)
    check_contract(parser, ns, on_xla="use jobs/train.py there")
    if not ns.model_name_or_path.is_dir():
        parser.error(f"--model_name_or_path {ns.model_name_or_path} is not a directory: the recipe loads a local "
                     "model only (download it to /shared first)")  # fmt: skip
    return ns


def training_arguments(ns: argparse.Namespace) -> TrainingArguments:
    """Before the model is loaded: with a ZeRO-3 config, from_pretrained then partitions it as it loads."""
    return contract_arguments(
        ns.output_dir, ns.save_steps, ns.save_total_limit, ns.logging_steps, ns.seed,
        per_device_train_batch_size=ns.per_device_train_batch_size,
        gradient_accumulation_steps=ns.gradient_accumulation_steps,
        learning_rate=ns.learning_rate,
        weight_decay=ns.weight_decay,
        max_grad_norm=ns.max_grad_norm,
        num_train_epochs=ns.num_train_epochs,
        max_steps=ns.max_steps,
        lr_scheduler_type="cosine",
        warmup_steps=ns.warmup_ratio,  # a float below 1 is a ratio of the total steps
        bf16=ns.bf16,
        activation_checkpointing=ns.gradient_checkpointing,  # transformers 5's name for gradient_checkpointing
        # non-reentrant: gradients reach LoRA adapters even though the frozen embeddings need none
        activation_checkpointing_kwargs={"use_reentrant": False},
        deepspeed=str(ns.deepspeed) if ns.deepspeed else None,
        ddp_find_unused_parameters=False,  # every trainable weight is used in each step
    )


def load_model(ns: argparse.Namespace) -> PreTrainedModel:
    # fp32 master weights under bf16 autocast for a full fine-tune; LoRA trains fp32 adapters on frozen
    # bf16 weights, halving the model's memory.
    dtype = torch.bfloat16 if ns.bf16 and ns.lora_r else torch.float32
    model = AutoModelForCausalLM.from_pretrained(ns.model_name_or_path, dtype=dtype)
    if ns.gradient_checkpointing:
        model.config.use_cache = False  # the cache is recomputed, not kept, under checkpointing
    if not ns.lora_r:
        return model
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=ns.lora_r, lora_alpha=ns.lora_alpha, lora_dropout=ns.lora_dropout, task_type="CAUSAL_LM",
                      target_modules=[m.strip() for m in ns.lora_target_modules.split(",") if m.strip()])  # fmt: skip
    return get_peft_model(model, lora)  # type: ignore[return-value]


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    args = device_arguments(lambda: training_arguments(ns), Path(__file__).name)
    job = HfJob.start(args, ns.output_dir, ns.stop_file, ns.stop_check_every)
    if ns.deepspeed and args.use_cpu:
        # With use_cpu, accelerate starts torch.distributed but not deepspeed.comm, and ZeRO-3's loading
        # (deepspeed.zero.Init in from_pretrained) would then size the batch for a world of one process.
        import deepspeed

        deepspeed.init_distributed(auto_mpi_discovery=False)
    set_seed(ns.seed)  # the LoRA adapters' initial weights
    model = load_model(ns)
    tokenizer = AutoTokenizer.from_pretrained(ns.model_name_or_path) if ns.dataset.suffix != TOKEN_SUFFIX else None
    data = load_blocks(ns.dataset, ns.max_seq_length, tokenizer, model.config.vocab_size, ns.text_field,
                       ns.data_dtype)  # fmt: skip
    trainer = job.trainer(model=model, args=args, train_dataset=data, data_collator=default_data_collator,
                          processing_class=tokenizer)  # fmt: skip
    job.train(trainer, examples=len(data), lora_r=ns.lora_r, deepspeed=str(ns.deepspeed) if ns.deepspeed else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
