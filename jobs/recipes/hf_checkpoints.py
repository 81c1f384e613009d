"""The job scripts' checkpoint contract for a Hugging Face Trainer: stop requests agreed by every rank turn
into a saved checkpoint, checkpoints count only once every rank's files are written, and the run reports
itself as JSON lines (rank 0), like jobs/train.py."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch.distributed as dist
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from jobs.checkpoint_layout import OWN_COMMIT_MARKER, TRAINER_DIR
from jobs.training.distributed import DistEnv
from jobs.training.metrics import JsonLog
from jobs.training.preemption import StopRequest

# Written into checkpoint-<n>/ by rank 0 after every rank has written its part (the Trainer writes
# trainer_state.json on rank 0 while other ranks may still be writing RNG states or DeepSpeed shards).
COMMIT_MARKER = OWN_COMMIT_MARKER


def _checkpoints(root: Path) -> list[tuple[int, Path]]:
    """(step, directory) of every checkpoint-<n> under `root`, complete or not, oldest first."""
    return sorted((int(m.group(1)), path) for path in root.glob("checkpoint-*")
                  if (m := TRAINER_DIR.fullmatch(path.name)) and path.is_dir())  # fmt: skip


def latest_complete_checkpoint(root: Path) -> Path | None:
    """The newest checkpoint-<n> directory under `root` with its commit marker; a torn save is skipped."""
    complete = [path for _, path in _checkpoints(root) if (path / COMMIT_MARKER).is_file()]
    return complete[-1] if complete else None


def remove_torn(root: Path) -> list[Path]:
    """Delete the checkpoints an earlier attempt left half written (call before training starts). The
    Trainer's rotation (--save-total-limit) counts every checkpoint-<n>: torn ones could push out the last
    complete one."""
    torn = [path for _, path in _checkpoints(root) if not (path / COMMIT_MARKER).is_file()]
    for path in torn:
        shutil.rmtree(path)
    return torn


class JobContract(TrainerCallback):
    """Every `every` optimizer steps the ranks agree on stop requests (SIGUSR2, SIGTERM, the stop file, as
    jobs/training/preemption.py's StopRequest sees them); on one, the Trainer saves a checkpoint and stops.
    Also commits each checkpoint and logs JSON lines."""

    def __init__(self, stop: StopRequest, every: int, log: JsonLog) -> None:
        self.stop = stop
        self.every = every
        self.log = log
        self.reasons: list[str] = []
        self.last_checkpoint: Path | None = None
        self._env: DistEnv | None = None

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:  # fmt: skip
        # A gloo group of its own: the agreement is a CPU tensor, which NCCL (the Trainer's group on GPUs)
        # cannot reduce, and it never waits for the GPU's queue.
        group = dist.new_group(backend="gloo") if dist.is_initialized() else None
        self._env = DistEnv(args.process_index, args.local_process_index, args.world_size, args.device, group)
        self._barrier()  # the stale stop file is gone (rank 0 cleared it) before any rank looks for one

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                    **kwargs: Any) -> None:  # fmt: skip
        if state.global_step % self.every:
            return
        assert self._env is not None, "on_train_begin comes first"
        self.reasons = self.stop.agreed(self._env)
        if self.reasons:
            control.should_save = True
            control.should_training_stop = True

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                **kwargs: Any) -> None:  # fmt: skip
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        self._barrier()
        if state.is_world_process_zero:
            (checkpoint / COMMIT_MARKER).touch()
        self.last_checkpoint = checkpoint
        self.log(event="checkpoint", step=state.global_step, path=str(checkpoint))

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
               logs: dict[str, float] | None = None, **kwargs: Any) -> None:  # fmt: skip
        self.log(step=state.global_step, **(logs or {}))

    def _barrier(self) -> None:
        if self._env is not None and self._env.cpu_group is not None:
            dist.barrier(group=self._env.cpu_group)
