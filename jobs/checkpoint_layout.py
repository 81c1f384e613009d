"""Where each trainer of this repository writes its checkpoints inside a job's directory, and when one is complete:
one definition for the trainers (which write the markers) and the checkpoint store (which copies only complete
checkpoints to S3 and restores them in place). Standard library only: the store runs without torch.

- jobs/train.py (CUDA/CPU): `<dir>/step-<n>/`, complete once DCP's own `.metadata` exists (DCP writes it last).
- jobs/train.py (XLA): `<dir>/step-<n>/`, complete once rank 0 wrote `.complete` after every rank's files.
- jobs/recipes/titan.py: torchtitan's DCP checkpoints in `<dir>/checkpoint/step-<n>/` (torchtitan's default
  `checkpoint.folder`, under the job's directory as `dump_folder`), complete once `.metadata` exists.
- jobs/recipes/hf_finetune.py, bert_pretrain.py: the Trainer's `<dir>/checkpoint-<n>/`, complete once rank 0 wrote
  `.complete` after every rank's part (jobs/recipes/hf_checkpoints.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DCP_COMMIT_MARKER = ".metadata"  # DCP's own, written last
OWN_COMMIT_MARKER = ".complete"  # ours (XLA saves, the Trainer's checkpoints), written by rank 0 last
COMMIT_MARKERS = (DCP_COMMIT_MARKER, OWN_COMMIT_MARKER)
TITAN_FOLDER = "checkpoint"  # torchtitan's default `checkpoint.folder`, under dump_folder
STEP_DIR = re.compile(r"step-(\d+)")
TRAINER_DIR = re.compile(r"checkpoint-(\d+)")
# Where checkpoint directories may sit, relative to the job's directory (the trainers above, nothing deeper).
_PARENTS = (Path("."), Path(TITAN_FOLDER))


@dataclass(frozen=True, order=True)
class CheckpointDir:
    """One checkpoint directory: its step, its path relative to the job's directory (`step-40`,
    `checkpoint/step-40`, `checkpoint-40`) and where it is."""

    step: int
    relative: str
    path: Path


def step_of(name: str) -> int | None:
    """The step of a checkpoint directory's name, None for any other name."""
    match = STEP_DIR.fullmatch(name) or TRAINER_DIR.fullmatch(name)
    return int(match.group(1)) if match else None


def step_of_relative(relative: str) -> int | None:
    """The step of a checkpoint path relative to a job's directory when it is one the trainers above write
    (`step-40`, `checkpoint/step-40`, `checkpoint-40`); None for any other path (absolute, `..`, deeper, renamed)."""
    parent, _, name = relative.rpartition("/")
    if parent == "." or Path(parent or ".") not in _PARENTS:
        return None
    return step_of(name)


def is_complete(path: Path) -> bool:
    return any((path / marker).is_file() for marker in COMMIT_MARKERS)


def checkpoint_dirs(job_dir: Path) -> list[CheckpointDir]:
    """Every checkpoint directory of any trainer under `job_dir`, complete or not, oldest step first."""
    found: list[CheckpointDir] = []
    for parent in _PARENTS:
        where = job_dir / parent
        if not where.is_dir():
            continue
        for path in where.iterdir():
            step = step_of(path.name)
            if step is not None and path.is_dir():
                found.append(CheckpointDir(step, (parent / path.name).as_posix(), path))
    return sorted(found)


def complete_checkpoints(job_dir: Path) -> list[CheckpointDir]:
    """The complete ones, oldest step first."""
    return [c for c in checkpoint_dirs(job_dir) if is_complete(c.path)]
