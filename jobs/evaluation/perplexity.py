"""Perplexity of a jobs/train.py checkpoint on held-out tokens, in one process: the whole model is built and the
DCP checkpoint (saved under any layout: DDP, FSDP2, TP, PP) is loaded into it unsharded, DCP resharding on read.
The model must fit one device (or the host); a larger one is evaluated in Hugging Face format with the harness
(jobs/evaluation/harness.py), which can spread a model over a node's GPUs."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException

from jobs.checkpoint_layout import DCP_COMMIT_MARKER
from jobs.training.config import ModelConfig
from jobs.training.data import SyntheticTokens, TokenFile, TokenSource
from jobs.training.model import Transformer

HELD_OUT_SEED = 1_000_003  # synthetic held-out tokens come from a seed training never uses


class EvaluationError(RuntimeError):
    """A checkpoint or data that cannot be evaluated, in one line with the fix."""


@dataclass(frozen=True)
class Perplexity:
    loss: float  # mean cross-entropy per token, nats
    perplexity: float
    tokens: int
    windows: int


def load_model(checkpoint: Path, cfg: ModelConfig, device: torch.device) -> Transformer:
    """The model of `cfg` with the checkpoint's weights (the optimizer's state is not read)."""
    if not (checkpoint / DCP_COMMIT_MARKER).is_file():
        raise EvaluationError(f"{checkpoint} is not a complete jobs/train.py checkpoint (no {DCP_COMMIT_MARKER}): "
                              "give a step-<n> directory, or the job's directory for its newest")  # fmt: skip
    model = Transformer(dataclasses.replace(cfg, dropout=0.0), seed=0).to(device)
    # The training state dict names parameters "model.<fqn>" (jobs/training/checkpoint.py); only those are read.
    state = {"model": model.state_dict()}
    try:
        with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
            warnings.simplefilter("ignore", UserWarning)
            dcp.load(state, checkpoint_id=checkpoint)
    except (CheckpointException, RuntimeError, ValueError, KeyError) as exc:
        reason = next((line for line in str(exc).splitlines()[::-1] if "Error" in line or "mismatch" in line),
                      str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        raise EvaluationError(f"{checkpoint} does not hold this model's weights ({reason.strip()[:240]}): give the "
                              "training run's model flags (--model or the shape flags)") from None
    model.load_state_dict(state["model"])
    return model.eval()


def held_out(data: Path | None, dtype: str, cfg: ModelConfig) -> TokenSource:
    if data is None:
        return SyntheticTokens(cfg.shape.vocab_size, HELD_OUT_SEED)
    try:
        return TokenFile(data, dtype, cfg.shape.vocab_size, cfg.seq_len, seed=HELD_OUT_SEED)
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"--eval-data {data}: {exc}") from None


@torch.no_grad()
def perplexity(model: Transformer, source: TokenSource, windows: int, batch_size: int,
               device: torch.device) -> Perplexity:  # fmt: skip
    """Mean cross-entropy over `windows` held-out windows of seq_len tokens (their next tokens as targets)."""
    seq_len = model.cfg.seq_len
    total, count = 0.0, 0
    for start in range(0, windows, batch_size):
        batch = torch.stack([source.sample(i, seq_len + 1) for i in range(start, min(start + batch_size, windows))])
        batch = batch.to(device)
        loss = model(batch[:, :-1], batch[:, 1:])
        n = batch.shape[0] * seq_len
        total += float(loss) * n
        count += n
    mean = total / count
    return Perplexity(mean, math.exp(mean), count, windows)
