"""Command-line flags (optionally from a JSON file) parsed into a validated `TrainConfig`."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobs.training.cadence import STOP_CHECK_SECONDS
from jobs.training.mesh import fsdp_problem, model_problems
from jobs.training.presets import PRESETS, ModelShape, ffn_hidden_dim
from jobs.training.released import ReleaseError, read_release

STOP_FILE_ENV = "SLURM_EKS_STOP_FILE"
CHECKPOINT_DIR_ENV = "SLURM_EKS_CHECKPOINT_DIR"  # set by the rendered sbatch scripts (jobs/templates)
DEVICE_ENV = "SLURM_EKS_DEVICE"  # "neuron" (or the legacy "xla") from the Neuron job script
DEVICE_KINDS = ("auto", "cuda", "neuron", "xla", "cpu")  # auto: CUDA when present, else the CPU


# Shape flags without --model: their defaults (None: derived, see the flags' help). With --model, any of them
# given is an error, so they default to None to tell "given" from "not given".
CUSTOM_SHAPE_DEFAULTS: dict[str, int | bool | None] = {
    "d_model": 128, "n_layers": 2, "n_heads": 4, "n_kv_heads": None, "ffn_dim": None, "vocab_size": 512,
    "tie_embeddings": False,
}  # fmt: skip


@dataclass(frozen=True)
class ModelConfig:
    shape: ModelShape
    seq_len: int
    dropout: float
    name: str = "custom"  # the preset's name, or "custom" for a shape from the flags


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
    tp: int
    pp: int
    dp_replicate: int
    activation_checkpointing: bool
    compile: bool
    checkpoint_dir: Path | None
    checkpoint_every: int
    keep_checkpoints: int
    async_checkpoint: bool
    stop_file: Path | None
    stop_check_every: int | None  # None: about every STOP_CHECK_SECONDS (jobs/training/cadence.py)
    log_every: int
    init_from: Path | None = None  # released weights (jobs/training/released.py); None: torchtitan's init
    ac_every: int = 1  # with activation_checkpointing: every N-th layer (1: every layer)


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


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows defaults, except None: those flags say in their help what happens without them."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default is None else super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Resumable Llama-style decoder training under torchrun (DDP, FSDP2/HSDP, tensor and pipeline "
        "parallelism; DCP checkpoints).",
        formatter_class=_HelpFormatter,
    )
    p.add_argument("--config", type=Path, help="JSON object of flag values (keys as dest names, e.g. d_model)")
    run = p.add_argument_group("run")
    run.add_argument("--steps", type=_positive_int, default=100, help="optimizer steps in total")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--log-every", type=_positive_int, default=10)
    model = p.add_argument_group(
        "model (Llama-style decoder)", "a preset (--model), or a custom shape from the shape flags, not both"
    )
    model.add_argument("--model", choices=list(PRESETS), help="preset shape (jobs/training/presets.py)")
    d = CUSTOM_SHAPE_DEFAULTS
    model.add_argument("--vocab-size", type=_positive_int, help=f"custom shape (default {d['vocab_size']})")
    model.add_argument("--d-model", type=_positive_int, help=f"custom shape: width (default {d['d_model']})")
    model.add_argument("--n-layers", type=_positive_int, help=f"custom shape (default {d['n_layers']})")
    model.add_argument("--n-heads", type=_positive_int, help=f"custom shape: query heads (default {d['n_heads']})")
    model.add_argument("--n-kv-heads", type=_positive_int, help="custom shape: key/value heads, dividing "
                       "--n-heads (default --n-heads: no grouping)")  # fmt: skip
    model.add_argument("--ffn-dim", type=_positive_int, help="custom shape: SwiGLU hidden width (default "
                       "8/3 x --d-model rounded up to a multiple of 256)")  # fmt: skip
    model.add_argument("--tie-embeddings", action="store_true", default=None,
                       help="custom shape: the output projection shares the embedding's weight")  # fmt: skip
    model.add_argument("--init-from", type=Path, metavar="DIR",
                       help="start from released Llama 3 / 3.1 weights: a directory of safetensors in Hugging Face's "
                       "layout (config.json) or Meta's (params.json); the shape comes from its config, so no --model "
                       "or shape flags. A checkpoint in --checkpoint-dir still wins (a resumed run)")  # fmt: skip
    model.add_argument("--seq-len", type=_positive_int, default=128)
    model.add_argument("--dropout", type=_fraction, default=0.0, help="on attention probabilities and on "
                       "each residual branch (Llama trains without; the resume tests use it for RNG)")  # fmt: skip
    optim = p.add_argument_group("optimizer")
    optim.add_argument("--batch-size", type=_positive_int, default=8,
                       help="sequences per data-parallel replica per micro-step")  # fmt: skip
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
        help=f"neuron: Trainium2/3 through TorchNeuron (torch-neuronx 2.13+, Neuron 2.33+); xla: the legacy "
        f"torch-xla path (trn1, images before Neuron 2.30; data parallel only) (default: ${DEVICE_ENV}, else auto)",
    )
    par.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard over dp_shard instead of DDP (dp_shard = "
                     "world size / (pp x dp-replicate x tp); needed by --tp, --pp and --dp-replicate)")  # fmt: skip
    par.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel degree (with sequence "
                     "parallelism), inside a node")  # fmt: skip
    par.add_argument("--pp", type=_positive_int, default=1, help="pipeline stages (1F1B over --grad-accum "
                     "micro-batches)")  # fmt: skip
    par.add_argument("--dp-replicate", type=_positive_int, default=1, help="HSDP: replicas, each sharded over "
                     "dp_shard ranks")  # fmt: skip
    par.add_argument("--activation-checkpointing", action="store_true",
                     help="recompute the layers' activations in backward instead of keeping them")
    par.add_argument("--ac-every", type=_positive_int, default=1, metavar="N",
                     help="with --activation-checkpointing, only every N-th layer (torchtitan's layer-level "
                          "selective checkpointing; default 1: every layer)")
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
        default=None,
        help=f"steps between stop checks (a small collective); a stop request waits at most this many steps. "
        f"Default: about every {STOP_CHECK_SECONDS:g} s of training, after every step when a step is longer",
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
    if not 0.0 <= args.min_lr_ratio <= 1.0:
        parser.error(f"--min-lr-ratio must be in [0, 1], got {args.min_lr_ratio}")
    if args.lr <= 0 or args.weight_decay < 0 or args.grad_clip < 0:
        parser.error("--lr must be > 0, --weight-decay and --grad-clip >= 0")
    if args.warmup_steps >= args.steps:
        parser.error(f"--warmup-steps {args.warmup_steps} must be < --steps {args.steps}")
    if args.device == "xla" and (args.fsdp or args.compile):
        flag = "--fsdp" if args.fsdp else "--compile"
        parser.error(f"{flag} is for CUDA, Neuron and the CPU; on --device xla data parallelism is xm's all-reduce "
                     "and XLA compiles each step's graph already: drop the flag (or use --device neuron on trn2/trn3)")
    if args.device == "xla" and max(args.tp, args.pp, args.dp_replicate) > 1:
        parser.error("--tp, --pp and --dp-replicate are for CUDA, Neuron and the CPU: on --device xla (the legacy "
                     "path) jobs/train.py is data parallel only; --device neuron (TorchNeuron, trn2/trn3) has them")
    if args.ac_every > 1 and not args.activation_checkpointing:
        parser.error(f"--ac-every {args.ac_every} chooses which layers --activation-checkpointing recomputes: add "
                     "--activation-checkpointing, or drop --ac-every")
    if args.data is not None and not args.data.is_file():
        parser.error(f"--data {args.data}: no such file")
    model = ModelConfig(_model_shape(parser, args), args.seq_len, args.dropout, args.model or "custom")
    if problem := fsdp_problem(tp=args.tp, pp=args.pp, dp_replicate=args.dp_replicate, fsdp=args.fsdp):
        parser.error(problem)
    if problems := model_problems(model.shape, args.seq_len, args.grad_accum, tp=args.tp, pp=args.pp):
        parser.error(f"--tp {args.tp} --pp {args.pp}: {'; '.join(problems)}")
    fields = {k: v for k, v in vars(args).items() if k in TrainConfig.__dataclass_fields__ and k != "model"}
    return TrainConfig(model=model, **fields)


def _model_shape(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ModelShape:
    given = {dest: getattr(args, dest) for dest in CUSTOM_SHAPE_DEFAULTS if getattr(args, dest) is not None}
    if args.init_from is not None:
        if args.model is not None or given:
            flag = "--model" if args.model is not None else "--" + next(iter(given)).replace("_", "-")
            parser.error(f"{flag} conflicts with --init-from {args.init_from}: the release's config fixes the shape")
        try:
            return read_release(args.init_from).shape
        except (ReleaseError, KeyError) as error:
            parser.error(f"--init-from {args.init_from}: {error}")
    if args.model is not None:
        if given:
            flag = "--" + next(iter(given)).replace("_", "-")
            parser.error(f"{flag} conflicts with --model {args.model}: a preset fixes the shape")
        return PRESETS[args.model]
    v = {**CUSTOM_SHAPE_DEFAULTS, **given}
    shape = ModelShape(
        dim=v["d_model"],
        n_layers=v["n_layers"],
        n_heads=v["n_heads"],
        n_kv_heads=v["n_kv_heads"] or v["n_heads"],
        ffn_dim=v["ffn_dim"] or ffn_hidden_dim(v["d_model"], 256),
        vocab_size=v["vocab_size"],
        tie_embeddings=bool(v["tie_embeddings"]),
    )
    if problems := shape.problems():
        parser.error(f"model shape (--d-model, --n-heads, --n-kv-heads): {'; '.join(problems)}")
    return shape
