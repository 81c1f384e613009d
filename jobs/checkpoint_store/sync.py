"""The checkpoint manager's two moves inside a job: before training, restore the newest checkpoint from S3 when the
job's directory has none (a requeue after /shared lost it, another cluster, a restored file system); during
training, every `interval` seconds copy the newest complete checkpoint not yet in S3 and keep the newest `keep`
there; when asked to finish (the stop file), one last copy, then return. Errors of one round are reported and the
next round tries again: a slow or failing S3 never stops training."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

from jobs.checkpoint_layout import complete_checkpoints
from jobs.checkpoint_store.codec import CodecError
from jobs.checkpoint_store.location import JobKey
from jobs.checkpoint_store.store import CheckpointStore, Manifest, StoreError

Log = Callable[[str], None]
ROUND_ERRORS = (StoreError, CodecError, BotoCoreError, ClientError, OSError)


def restore_if_missing(store: CheckpointStore, job: JobKey, job_dir: Path, log: Log) -> Manifest | None:
    """The newest checkpoint from S3 into `job_dir` when it has no complete checkpoint; None when nothing was
    needed or nothing is stored."""
    local = complete_checkpoints(job_dir)
    if local:
        log(f"resuming from {local[-1].relative} on the shared file system")
        return None
    stored = store.manifests(job)
    if not stored:
        log(f"no checkpoint of {job.user}/{job.job} here or in {store.location}: starting afresh")
        return None
    newest = stored[-1]
    started = time.monotonic()
    path = store.restore(newest, job_dir, job)
    log(f"restored {newest.checkpoint} (step {newest.step}, {newest.size / 1e6:.1f} MB) from {store.location} "
        f"into {path} in {time.monotonic() - started:.1f} s")
    return newest


def sync_newest(store: CheckpointStore, job: JobKey, job_dir: Path, keep: int, log: Log) -> Manifest | None:
    """Copy the newest complete checkpoint unless S3 has it, then prune to `keep`. Returns what was copied."""
    local = complete_checkpoints(job_dir)
    if not local or store.has(job, local[-1].relative):
        return None
    newest = local[-1]
    started = time.monotonic()
    manifest = store.upload(job, newest)
    seconds = time.monotonic() - started
    log(f"copied {newest.relative} (step {newest.step}, {manifest.size / 1e6:.1f} MB, stored "
        f"{manifest.stored_size / 1e6:.1f} MB) to {store.location} in {seconds:.1f} s")
    pruned = store.prune(job, keep)
    if pruned:
        log(f"pruned {', '.join(pruned)} from {store.location} (keeping {keep})")
    return manifest


def watch(store: CheckpointStore, job: JobKey, job_dir: Path, *, interval: float, keep: int, finish: Path,
          log: Log, tick: float = 1.0) -> None:  # fmt: skip
    """Rounds of sync_newest every `interval` seconds until `finish` exists, then a last round."""
    next_round = 0.0
    while True:
        finishing = finish.exists()
        if finishing or time.monotonic() >= next_round:
            try:
                sync_newest(store, job, job_dir, keep, log)
            except ROUND_ERRORS as exc:
                log(f"copy to {store.location} failed, {'giving up' if finishing else 'trying again'}: {exc}")
            next_round = time.monotonic() + interval
        if finishing:
            return
        time.sleep(tick)
