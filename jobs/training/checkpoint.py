"""Checkpoints in <root>/step-<n>/, complete only once their commit marker exists.

On CUDA and the CPU they are distributed checkpoints (DCP): every rank's shard files first and DCP's
`.metadata` last (to a temp name, then renamed), so a directory without it was torn by a crash or kill
and is ignored. One DCP state dict holds the model and optimizer (via get/set_state_dict: each rank gives
what it holds, DDP replica, FSDP2 or tensor-parallel shard or pipeline stage, under the whole model's
names), the scheduler, the step and data position, and each rank's RNG states under its own key
`rng_rank<r>`. Periodic saves are asynchronous (`dcp.async_save`: the state is staged to host
memory, then written by a thread while training goes on); the next save, the last one and a preemption's
wait for it. On XLA devices the XLA way (`xm.save` from the global master, see jobs/training/xla.py):
`state.pt`, one `rng_rank<r>.pt` per rank (the CPU generator: the XLA one is seeded per step), and
`.complete` written last by rank 0.
"""

from __future__ import annotations

import shutil
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.optim.lr_scheduler import LRScheduler

from jobs.checkpoint_layout import DCP_COMMIT_MARKER, OWN_COMMIT_MARKER, STEP_DIR
from jobs.training.distributed import DistEnv

# Unflattened, "param_groups" is one list per rank naming that rank's parameters: under PP each stage's differs
# but DCP keeps one copy of a key (torchtitan `torchtitan/components/optimizer.py` OptimizersContainer flattens).
_STATE_DICT_OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)
COMMIT_MARKER = DCP_COMMIT_MARKER  # DCP's own, written last
XLA_COMMIT_MARKER = OWN_COMMIT_MARKER  # ours, written by rank 0 once every rank's files are on disk


@dataclass(frozen=True)
class Progress:
    step: int
    data_position: int


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step}"


def is_complete(path: Path) -> bool:
    return (path / COMMIT_MARKER).is_file() or (path / XLA_COMMIT_MARKER).is_file()


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """All step-<n> directories under root, complete or not, oldest first."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.fullmatch(p.name)) and p.is_dir()]
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


@dataclass(frozen=True)
class TrainingState:
    """What a checkpoint holds (model, optimizer, scheduler, this rank's RNG) and where it goes."""

    root: Path
    keep: int  # complete checkpoints kept
    env: DistEnv
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: LRScheduler


class Checkpointer(Protocol):
    """Saves and restores the whole training state collectively; every rank calls every method."""

    root: Path

    def save(self, progress: Progress, wait: bool) -> Path:
        """Start saving (finished before returning when `wait`); returns the step directory."""
        ...

    def wait(self) -> None:
        """Until the save in flight, if any, is complete (and older checkpoints are pruned)."""
        ...

    def load(self, path: Path) -> tuple[Progress, bool]:
        """Restore everything from `path`. Returns the progress and whether this rank's RNG was in it
        (not when the world size grew since the save; the caller then reseeds)."""
        ...


def _wrong_format(path: Path, marker: str) -> ValueError:
    writer = "the XLA path (--device xla)" if marker == COMMIT_MARKER else "the CUDA/CPU path (DCP)"
    return ValueError(f"{path} was written by {writer}: resume with the same --device, or use a new --checkpoint-dir")


class DcpCheckpointer:
    """DCP checkpoints; see the module docstring."""

    def __init__(self, state: TrainingState, asynchronous: bool) -> None:
        self.state = state
        self.root = state.root
        # The background save runs its own collectives: on a group of its own they cannot interleave with
        # the training loop's (the DCP async tutorial's advice: a separate gloo group).
        self.group = dist.new_group(backend="gloo") if asynchronous else None
        self.pending: Future[object] | None = None

    def _state(self, progress: Progress) -> dict[str, object]:
        model_sd, optim_sd = get_state_dict(self.state.model, self.state.optimizer, options=_STATE_DICT_OPTIONS)
        return {
            "model": model_sd,
            "optim": optim_sd,
            "scheduler": self.state.scheduler.state_dict(),
            "progress": {"step": progress.step, "data_position": progress.data_position},
            _rng_key(self.state.env.rank): _rng_state(self.state.env.device),
        }

    def save(self, progress: Progress, wait: bool) -> Path:
        self.wait()
        path = _fresh_step_dir(self.root, progress.step, self.state.env)
        if self.group is None or wait:
            dcp.save(self._state(progress), checkpoint_id=path)
            self._committed()
        else:
            # Returns once the state is staged in host memory (a copy: the next steps cannot change it).
            response = dcp.async_save(self._state(progress), checkpoint_id=path, process_group=self.group)
            self.pending = getattr(response, "upload_completion", response)
        return path

    def wait(self) -> None:
        if self.pending is not None:
            self.pending.result()
            self.pending = None
            self._committed()

    def _committed(self) -> None:
        if self.state.env.is_main:
            prune(self.root, self.state.keep)

    def load(self, path: Path) -> tuple[Progress, bool]:
        if not (path / COMMIT_MARKER).is_file():
            raise _wrong_format(path, XLA_COMMIT_MARKER)
        saved_keys = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
        state = self._state(Progress(0, 0))
        key = _rng_key(self.state.env.rank)
        has_rng = any(k.startswith(f"{key}.") for k in saved_keys)
        if not has_rng:
            del state[key]
        dcp.load(state, checkpoint_id=path)
        set_state_dict(self.state.model, self.state.optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"], options=_STATE_DICT_OPTIONS)  # fmt: skip
        self.state.scheduler.load_state_dict(state["scheduler"])
        if has_rng:
            rng = state[key]
            torch.set_rng_state(rng["cpu"])
            if self.state.env.device.type == "cuda":
                torch.cuda.set_rng_state(rng["cuda"], self.state.env.device)
        progress = state["progress"]
        return Progress(int(progress["step"]), int(progress["data_position"])), has_rng


def _fresh_step_dir(root: Path, step: int, env: DistEnv) -> Path:
    path = step_dir(root, step)
    if env.is_main:
        # A torn directory of this step (from an attempt killed while writing it) must not mix in.
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    dist.barrier(group=env.cpu_group)
    return path


class XlaCheckpointer:
    """The XLA way: replicas hold identical weights, so the global master writes them once (`xm.save`,
    moved to the host first); each rank adds its RNG; rank 0 commits after a barrier."""

    def __init__(self, state: TrainingState) -> None:
        from jobs.training import xla

        self.xla = xla
        self.state = state
        self.root = state.root

    def save(self, progress: Progress, wait: bool) -> Path:
        path = _fresh_step_dir(self.root, progress.step, self.state.env)
        self.xla.sync()  # the step's graph has run: the weights read below are this step's
        state = {
            "model": self.state.model.state_dict(),
            "optim": self.state.optimizer.state_dict(),
            "scheduler": self.state.scheduler.state_dict(),
            "progress": {"step": progress.step, "data_position": progress.data_position},
        }
        self.xla.save(state, str(path / "state.pt"))
        # The CPU generator only: the XLA one is seeded per step (jobs/training/xla.py manual_seed).
        torch.save(_rng_state(self.state.env.device), path / f"{_rng_key(self.state.env.rank)}.pt")
        dist.barrier(group=self.state.env.cpu_group)
        if self.state.env.is_main:
            (path / XLA_COMMIT_MARKER).touch()
            prune(self.root, self.state.keep)
        return path

    def wait(self) -> None:
        """Saves are synchronous here."""

    def load(self, path: Path) -> tuple[Progress, bool]:
        if not (path / XLA_COMMIT_MARKER).is_file():
            raise _wrong_format(path, COMMIT_MARKER)
        state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
        self.state.model.load_state_dict(state["model"])
        self.state.optimizer.load_state_dict(state["optim"])  # moves the moments onto the parameters' device
        self.state.scheduler.load_state_dict(state["scheduler"])
        rng = path / f"{_rng_key(self.state.env.rank)}.pt"
        if rng.is_file():
            torch.set_rng_state(torch.load(rng, weights_only=True)["cpu"])
        progress = state["progress"]
        return Progress(int(progress["step"]), int(progress["data_position"])), rng.is_file()
