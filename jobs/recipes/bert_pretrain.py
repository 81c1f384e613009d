"""BERT pre-training (masked LM + next-sentence prediction) with the Hugging Face Trainer under torchrun, on the job
scripts' checkpoint contract: `torchrun ... jobs/recipes/bert_pretrain.py --data DIR [flags]` (`--help` lists them).

The brief's "BERT-Large on Trainium" example, after AWS's BERT-Large pre-training tutorial
(aws-neuron/aws-neuron-samples torch-neuronx/training/dp_bert_hf_pretrain/dp_bert_large_hf_pretrain_hdf5.py, a
PyTorch/XLA recipe archived with Neuron 2.32): BertForPreTraining of bert-large-uncased's shape from random
weights, its HDF5 shards (keys input_ids, segment_ids, input_mask, masked_lm_positions, masked_lm_ids,
next_sentence_labels), AdamW at lr 4e-4 with 2,000 warmup steps and weight decay 0.01 (phase 1: 128-token
sequences, up to 20 masked tokens; phase 2: 512 and 80). Here it runs through the Trainer, so the same script runs
on Trainium2/3 through TorchNeuron (SLURM_EKS_DEVICE=neuron: accelerate takes the `neuron` device and backend),
on GPUs and on the CPU.

The contract is jobs/recipes/hf_finetune.py's (checkpoint-<step>/ committed with `.complete`, resume from the newest
complete one, PREEMPTED / DONE, the final model in `<output-dir>/final/`; jobs/recipes/hf_job.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script (torchrun jobs/recipes/bert_pretrain.py): make `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from transformers import BertConfig, BertForPreTraining, TrainingArguments, set_seed

from jobs.recipes.bert_data import PretrainingShards
from jobs.recipes.hf_job import HfJob, check_contract, contract_arguments, device_arguments
from jobs.training.cadence import RECIPE_STOP_CHECK_EVERY
from jobs.training.config import CHECKPOINT_DIR_ENV, STOP_FILE_ENV

# bert-large-uncased, the tutorial's model: 24 layers, hidden 1024, 16 heads (the Neuron tutorial); feed-forward 4H,
# 512 positions and 2 segment types (Devlin et al. 2019, "BERT", section 3), and the 30,522 WordPiece ids of the
# uncased release's vocab.txt (the shards' token ids must stay below it: jobs/recipes/bert_data.py checks).
BERT_LARGE = {"vocab_size": 30522, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
              "intermediate_size": 4096, "max_position_embeddings": 512, "type_vocab_size": 2}  # fmt: skip
# The tutorial's phase 1 (dp_bert_large_hf_pretrain_hdf5.py defaults): AdamW, linear warmup then decay.
PHASE1 = {"lr": 4e-4, "warmup_steps": 2000, "max_steps": 28125, "weight_decay": 0.01, "max_pred_length": 20}


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bert_pretrain.py",
        description="BERT pre-training (MLM + NSP) with the Hugging Face Trainer on the job scripts' contract.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data", type=Path, required=True, help="directory of HDF5 shards (*.hdf5, *.h5) in the "
                   "tutorial's format (jobs/recipes/bert_data.py)")  # fmt: skip
    p.add_argument("--config", type=Path, default=None, help="directory with a BertConfig config.json; default: "
                   "bert-large-uncased's shape")  # fmt: skip
    p.add_argument("--max-pred-length", type=_positive, default=PHASE1["max_pred_length"],
                   help="masked positions per sequence in the shards (20 in phase 1, 80 in phase 2)")
    p.add_argument("--output-dir", type=Path, default=os.environ.get(CHECKPOINT_DIR_ENV),
                   help=f"checkpoints, markers, final model (default ${CHECKPOINT_DIR_ENV})")
    p.add_argument("--stop-file", type=Path, default=os.environ.get(STOP_FILE_ENV), help=f"default ${STOP_FILE_ENV}")
    p.add_argument("--stop-check-every", type=_positive, default=RECIPE_STOP_CHECK_EVERY)
    p.add_argument("--batch-size", type=_positive, default=16, help="sequences per worker per micro-step")
    p.add_argument("--grad-accum", type=_positive, default=32, help="micro-steps per optimizer step")
    p.add_argument("--lr", type=float, default=PHASE1["lr"])
    p.add_argument("--warmup-steps", type=int, default=PHASE1["warmup_steps"])
    p.add_argument("--max-steps", type=_positive, default=PHASE1["max_steps"])
    p.add_argument("--weight-decay", type=float, default=PHASE1["weight_decay"])
    p.add_argument("--bf16", action="store_true", help="bf16 mixed precision")
    p.add_argument("--save-steps", type=_positive, default=500)
    p.add_argument("--save-total-limit", type=int, default=3)
    p.add_argument("--logging-steps", type=_positive, default=10)
    p.add_argument("--seed", type=int, default=42)
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    ns = parser.parse_args(argv)
    check_contract(parser, ns, on_xla="run AWS's archived tutorial script there")
    if not ns.data.is_dir():
        parser.error(f"--data {ns.data} is not a directory of HDF5 shards")
    if ns.config is not None and not (ns.config / "config.json").is_file():
        parser.error(f"--config {ns.config} has no config.json")
    if ns.warmup_steps >= ns.max_steps:
        parser.error(f"--warmup-steps {ns.warmup_steps} must be < --max-steps {ns.max_steps}")
    return ns


def training_arguments(ns: argparse.Namespace) -> TrainingArguments:
    return contract_arguments(
        ns.output_dir, ns.save_steps, ns.save_total_limit, ns.logging_steps, ns.seed,
        per_device_train_batch_size=ns.batch_size,
        gradient_accumulation_steps=ns.grad_accum,
        learning_rate=ns.lr,
        weight_decay=ns.weight_decay,
        max_steps=ns.max_steps,
        lr_scheduler_type="linear",  # the tutorial's: linear warmup, then linear decay to 0
        warmup_steps=ns.warmup_steps,
        bf16=ns.bf16,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ns = parse_args(argv)
    args = device_arguments(lambda: training_arguments(ns), Path(__file__).name)
    job = HfJob.start(args, ns.output_dir, ns.stop_file, ns.stop_check_every)
    config = BertConfig.from_pretrained(ns.config) if ns.config is not None else BertConfig(**BERT_LARGE)
    set_seed(ns.seed)  # pre-training starts from random weights, the same on every rank
    model = BertForPreTraining(config)
    data = PretrainingShards(ns.data, ns.max_pred_length, config.vocab_size)
    trainer = job.trainer(model=model, args=args, train_dataset=data)
    job.train(trainer, examples=len(data), seq_len=data.seq_len, layers=config.num_hidden_layers,
              hidden=config.hidden_size)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
