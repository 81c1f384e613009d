"""Command-line flags (optionally from a JSON file) parsed into a validated `TrainConfig`."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

STOP_FILE_ENV = "SLURM_EKS_STOP_FILE"
CHECKPOINT_DIR_ENV = "SLURM_EKS_CHECKPOINT_DIR"  # set by the rendered sbatch scripts (jobs/templates)
DEVICE_ENV = "SLURM_EKS_DEVICE"  # "xla" from the Neuron job script
DEVICE_KINDS = ("auto", "cuda", "xla", "cpu")  # auto: CUDA when present, else the CPU


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    seq_len: int
    d_model: int
    n_layers: int
    n_heads: int
    dropout: float


@dataclass(frozen=True)
class TrainConfig:
    model: ModelConfig
    steps: int
    seed: int
    batch_size: int
    grad_accum: int
    lr: float
    min_lr_ratio: float
    warmup_steps: int
    weight_decay: float
    grad_clip: float
    data: Path | None
    data_dtype: str
    device: str
    fsdp: bool
    activation_checkpointing: bool
    compile: bool
    checkpoint_dir: Path | None
    checkpoint_every: int
    keep_checkpoints: int
    async_checkpoint: bool
    stop_file: Path | None
    stop_check_every: int
    log_every: int


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Resumable GPT training under torchrun (DDP or FSDP2, DCP checkpoints).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--config", type=Path, help="JSON object of flag values (keys as dest names, e.g. d_model)")
    run = p.add_argument_group("run")
    run.add_argument("--steps", type=_positive_int, default=100, help="optimizer steps in total")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--log-every", type=_positive_int, default=10)
    model = p.add_argument_group("model (GPT decoder)")
    model.add_argument("--vocab-size", type=_positive_int, default=512)
    model.add_argument("--seq-len", type=_positive_int, default=128)
    model.add_argument("--d-model", type=_positive_int, default=128)
    model.add_argument("--n-layers", type=_positive_int, default=2)
    model.add_argument("--n-heads", type=_positive_int, default=4)
    model.add_argument("--dropout", type=_fraction, default=0.0)
    optim = p.add_argument_group("optimizer")
    optim.add_argument("--batch-size", type=_positive_int, default=8, help="sequences per rank per micro-step")
    optim.add_argument("--grad-accum", type=_positive_int, default=1, help="micro-steps per optimizer step")
    optim.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    optim.add_argument("--min-lr-ratio", type=float, default=0.1, help="final lr as a fraction of --lr")
    optim.add_argument("--warmup-steps", type=_non_negative_int, default=10)
    optim.add_argument("--weight-decay", type=float, default=0.1)
    optim.add_argument("--grad-clip", type=float, default=1.0, help="max global grad norm; 0 disables")
    data = p.add_argument_group("data")
    data.add_argument("--data", type=Path, help="flat binary token file (memory-mapped); synthetic if absent")
    data.add_argument("--data-dtype", choices=("uint16", "uint32"), default="uint16")
    par = p.add_argument_group("device, parallelism and speed")
    par.add_argument(
        "--device",
        choices=DEVICE_KINDS,
        default=os.environ.get(DEVICE_ENV) or "auto",
        help=f"xla: Trainium through torch-xla (default: ${DEVICE_ENV}, else auto)",
    )
    par.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard instead of DDP")
    par.add_argument("--activation-checkpointing", action="store_true")
    par.add_argument("--compile", action="store_true", help="torch.compile each transformer block")
    ckpt = p.add_argument_group("checkpoints and preemption")
    ckpt.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=os.environ.get(CHECKPOINT_DIR_ENV) or None,
        help=f"DCP checkpoints go to <dir>/step-<n>/ (default: ${CHECKPOINT_DIR_ENV}); off if neither is set",
    )
    ckpt.add_argument("--checkpoint-every", type=_positive_int, default=50)
    ckpt.add_argument("--keep-checkpoints", type=_positive_int, default=2, help="keep the latest k complete")
    ckpt.add_argument(
        "--async-checkpoint",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="periodic checkpoints written in the background (dcp.async_save; the last one is always waited "
        "for); the XLA path saves synchronously",
    )
    ckpt.add_argument(
        "--stop-file",
        type=Path,
        default=os.environ.get(STOP_FILE_ENV) or None,
        help=f"checkpoint and stop once this file exists (default: ${STOP_FILE_ENV})",
    )
    ckpt.add_argument(
        "--stop-check-every",
        type=_positive_int,
        default=10,
        help="steps between stop checks (a small collective); a stop request waits at most this many steps",
    )
    return p


def _json_defaults(parser: argparse.ArgumentParser, path: Path) -> dict[str, object]:
    try:
        values = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        parser.error(f"--config {path}: {err}")
    if not isinstance(values, dict):
        parser.error(f"--config {path}: expected a JSON object of flag values")
    known = {a.dest for a in parser._actions} - {"help", "config"}
    unknown = sorted(set(values) - known)
    if unknown:
        parser.error(f"--config {path}: unknown keys {unknown}; known: {sorted(known)}")
    # Route each value through its flag's type check so the file gets the same validation as the CLI.
    flags = [f"--{k.replace('_', '-')}" for k in values]
    argv: list[str] = []
    for flag, value in zip(flags, values.values(), strict=True):
        if isinstance(value, bool):
            argv += [flag] if value else []
        else:
            argv += [flag, str(value)]
    return vars(parser.parse_args(argv))


def parse_args(argv: Sequence[str] | None = None) -> TrainConfig:
    """Parse flags; values from `--config` act as defaults that explicit flags override."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.config is not None:
        parser.set_defaults(**_json_defaults(parser, args.config))
        args = parser.parse_args(argv)
    if args.d_model % args.n_heads:
        parser.error(f"--d-model {args.d_model} must be divisible by --n-heads {args.n_heads}")
    if not 0.0 <= args.min_lr_ratio <= 1.0:
        parser.error(f"--min-lr-ratio must be in [0, 1], got {args.min_lr_ratio}")
    if args.lr <= 0 or args.weight_decay < 0 or args.grad_clip < 0:
        parser.error("--lr must be > 0, --weight-decay and --grad-clip >= 0")
    if args.warmup_steps >= args.steps:
        parser.error(f"--warmup-steps {args.warmup_steps} must be < --steps {args.steps}")
    if args.device == "xla" and (args.fsdp or args.compile):
        flag = "--fsdp" if args.fsdp else "--compile"
        parser.error(f"{flag} is for CUDA and the CPU; on --device xla data parallelism is xm's all-reduce and "
                     "XLA compiles each step's graph already: drop the flag")
    if args.data is not None and not args.data.is_file():
        parser.error(f"--data {args.data}: no such file")
    model = ModelConfig(
        vocab_size=args.vocab_size,
        seq_len=args.seq_len,
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        dropout=args.dropout,
    )
    fields = {k: v for k, v in vars(args).items() if k in TrainConfig.__dataclass_fields__}
    return TrainConfig(model=model, **fields)
