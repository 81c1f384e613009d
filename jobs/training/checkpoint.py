"""Distributed checkpoints (DCP) in <root>/step-<n>/, complete only once DCP's `.metadata` exists.

DCP writes every rank's shard files first and `.metadata` last (to a temp name, then renamed), so a
directory without it was torn by a crash or kill and is ignored. One DCP state dict holds the model and
optimizer (via get/set_state_dict, so DDP and FSDP2 shards both work), the scheduler, the step and data
position, and each rank's RNG states under its own key `rng_rank<r>`.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.optim.lr_scheduler import LRScheduler

from jobs.training.distributed import DistEnv

_STEP_DIR = re.compile(r"step-(\d+)")
COMMIT_MARKER = ".metadata"


@dataclass(frozen=True)
class Progress:
    step: int
    data_position: int


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step}"


def is_complete(path: Path) -> bool:
    return (path / COMMIT_MARKER).is_file()


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """All step-<n> directories under root, complete or not, oldest first."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.fullmatch(p.name)) and p.is_dir()]
    return sorted(found)


def latest_complete(root: Path) -> tuple[int, Path] | None:
    complete = [(step, path) for step, path in checkpoints(root) if is_complete(path)]
    return complete[-1] if complete else None


def prune(root: Path, keep: int) -> list[Path]:
    """Delete all but the newest `keep` complete checkpoints, and every torn one. Returns what went."""
    complete = [path for _, path in checkpoints(root) if is_complete(path)]
    kept = set(complete[-keep:])
    removed = [path for _, path in checkpoints(root) if path not in kept]
    for path in removed:
        shutil.rmtree(path, ignore_errors=True)
    return removed


def _rng_key(rank: int) -> str:
    return f"rng_rank{rank}"


def _rng_state(device: torch.device) -> dict[str, torch.Tensor]:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


class Checkpointer:
    """Saves and restores the whole training state collectively; every rank calls every method."""

    def __init__(
        self,
        root: Path,
        keep: int,
        env: DistEnv,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: LRScheduler,
    ) -> None:
        self.root = root
        self.keep = keep
        self.env = env
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler

    def _state(self, progress: Progress) -> dict[str, object]:
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {
            "model": model_sd,
            "optim": optim_sd,
            "scheduler": self.scheduler.state_dict(),
            "progress": {"step": progress.step, "data_position": progress.data_position},
            _rng_key(self.env.rank): _rng_state(self.env.device),
        }

    def save(self, progress: Progress) -> Path:
        path = step_dir(self.root, progress.step)
        if self.env.is_main:
            # A torn directory of this step (from an attempt killed while writing it) must not mix in.
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
        dist.barrier()
        dcp.save(self._state(progress), checkpoint_id=path)
        if self.env.is_main:
            prune(self.root, self.keep)
        return path

    def load(self, path: Path) -> tuple[Progress, bool]:
        """Restore everything from `path`. Returns the progress and whether this rank's RNG was in it
        (not when the world size grew since the save; the caller then reseeds)."""
        saved_keys = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
        state = self._state(Progress(0, 0))
        key = _rng_key(self.env.rank)
        has_rng = any(k.startswith(f"{key}.") for k in saved_keys)
        if not has_rng:
            del state[key]
        dcp.load(state, checkpoint_id=path)
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.scheduler.load_state_dict(state["scheduler"])
        if has_rng:
            rng = state[key]
            torch.set_rng_state(rng["cpu"])
            if self.env.device.type == "cuda":
                torch.cuda.set_rng_state(rng["cuda"], self.env.device)
        progress = state["progress"]
        return Progress(int(progress["step"]), int(progress["data_position"])), has_rng
