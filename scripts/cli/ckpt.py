"""`slurm-eks ckpt list|restore|prune`: the checkpoints the job scripts copied to S3 (jobs/checkpoint_store), seen
from the login pod. The location is the stack's `storage.checkpointStore.s3` (or `--s3`); each person's jobs are
under their own name. Registered by scripts/cli/main.py."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from components.config.problems import ConfigError
from components.config.stackfile import STACKS_DIR, load_stack
from scripts.cli.slurm import TableFormat

if TYPE_CHECKING:
    from jobs.checkpoint_store.store import CheckpointStore

errors = Console(stderr=True, soft_wrap=True)
ckpt_app = typer.Typer(no_args_is_help=True, help="Checkpoints the jobs copied to S3: list, restore, prune.")
CHECKPOINT_ROOT = Path("/shared/checkpoints")  # where the job scripts keep each person's jobs (jobs/render.py)

StackOpt = Annotated[str | None, typer.Option("--stack", "-s", help="stack whose storage.checkpointStore to read")]
S3Opt = Annotated[str | None, typer.Option("--s3", help="s3://bucket/prefix instead of the stack's store")]
UserOpt = Annotated[str | None, typer.Option("--user", "-u", help="whose jobs (default: you)")]
StacksDirOpt = Annotated[Path, typer.Option(help="directory of Pulumi.<stack>.yaml")]


@contextmanager
def _clear_errors() -> Iterator[None]:
    """Known failures: one red line, exit 1 (2 for a bad stack or location)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from jobs.checkpoint_store.codec import CodecError
    from jobs.checkpoint_store.location import LocationError
    from jobs.checkpoint_store.store import StoreError

    try:
        yield
    except ConfigError as exc:
        errors.print(exc.render(), highlight=False, markup=False)
        raise typer.Exit(2) from None
    except LocationError as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(2) from None
    except (StoreError, CodecError, BotoCoreError, ClientError, OSError) as exc:
        errors.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None


def _store(stack: str | None, s3: str | None, stacks_dir: Path) -> CheckpointStore:
    import boto3  # here: --help answers without botocore

    from jobs.checkpoint_store.location import LocationError, S3Location
    from jobs.checkpoint_store.store import CheckpointStore

    if s3 is None:
        if stack is None:
            raise LocationError("no checkpoint store given: pass --stack STACK (its storage.checkpointStore) or "
                                "--s3 s3://bucket/prefix")  # fmt: skip
        config, _ = load_stack(stack, stacks_dir)
        if config.storage.checkpoint_store is None:
            raise LocationError(f"stack {stack} has no storage.checkpointStore: its jobs keep checkpoints on /shared "
                                "only; set it (docs/config.md) or pass --s3")  # fmt: skip
        s3 = config.storage.checkpoint_store.s3
    return CheckpointStore(boto3.client("s3"), S3Location.parse(s3))


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


@ckpt_app.command("list")
def ckpt_list(
    job: Annotated[str | None, typer.Argument(help="one job (its directory's name, <name>-<id>): its checkpoints")]
    = None,
    stack: StackOpt = None, s3: S3Opt = None, user: UserOpt = None,
    format: Annotated[TableFormat, typer.Option(help="table for people, json for tools")] = TableFormat.table,
    stacks_dir: StacksDirOpt = STACKS_DIR,
) -> None:
    """Your jobs with checkpoints in S3, or one job's checkpoints (step, size, when, files)."""
    from jobs.checkpoint_store.location import JobKey

    with _clear_errors():
        store = _store(stack, s3, stacks_dir)
        who = user or getpass.getuser()
        jobs = [JobKey(who, job)] if job else store.jobs(who)
        listed: list[dict[str, Any]] = []
        for key in jobs:
            for m in store.manifests(key):
                listed.append({"user": m.user, "job": m.job, "checkpoint": m.checkpoint, "step": m.step,
                               "bytes": m.size, "storedBytes": m.stored_size, "files": len(m.files),
                               "created": m.created, "source": m.source})  # fmt: skip
    if format is TableFormat.json:
        typer.echo(json.dumps({"format": 1, "location": str(store.location), "user": who, "checkpoints": listed},
                              indent=1))  # fmt: skip
        return
    if not listed:
        errors.print(f"no checkpoints of {who}{' job ' + job if job else ''} in {store.location}", highlight=False)
        return
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("job", "checkpoint", "step", "size", "stored", "created"):
        table.add_column(column, justify="right" if column in ("step", "size", "stored") else "left")
    for row in listed:
        table.add_row(row["job"], row["checkpoint"], str(row["step"]), _mb(row["bytes"]), _mb(row["storedBytes"]),
                      row["created"])  # fmt: skip
    Console().print(table)


@ckpt_app.command("restore")
def ckpt_restore(
    job: Annotated[str, typer.Argument(help="the job (its directory's name, <name>-<id>)")],
    step: Annotated[int | None, typer.Option(help="this step's checkpoint (default: the newest)")] = None,
    to: Annotated[Path | None, typer.Option(
        help="the job directory to restore into (default: /shared/checkpoints/<user>/<job>)")] = None,
    stack: StackOpt = None, s3: S3Opt = None, user: UserOpt = None,
    stacks_dir: StacksDirOpt = STACKS_DIR,
) -> None:
    """Download a checkpoint into a job directory, every file checked against its manifest; then resubmit the
    job with SLURM_EKS_CHECKPOINT_DIR pointing there (the job's script prints the command when it stops)."""
    from jobs.checkpoint_store.location import JobKey
    from jobs.checkpoint_store.store import StoreError

    with _clear_errors():
        store = _store(stack, s3, stacks_dir)
        key = JobKey(user or getpass.getuser(), job)
        manifests = store.manifests(key)
        if not manifests:
            raise StoreError(f"no checkpoints of {key.user}/{key.job} in {store.location}: `slurm-eks ckpt list` "
                             "shows the jobs that have some")  # fmt: skip
        chosen = manifests[-1] if step is None else next((m for m in manifests if m.step == step), None)
        if chosen is None:
            raise StoreError(f"job {job} has no checkpoint of step {step} in {store.location}; steps: "
                             f"{', '.join(str(m.step) for m in manifests)}")  # fmt: skip
        target = to or CHECKPOINT_ROOT / key.user / key.job
        path = store.restore(chosen, target, key)
    errors.print(f"restored {chosen.checkpoint} (step {chosen.step}, {_mb(chosen.size)}) into {path}; resume with: "
                 f"sbatch --export=ALL,SLURM_EKS_CHECKPOINT_DIR={target} <the job script>", highlight=False,
                 markup=False)  # fmt: skip


@ckpt_app.command("prune")
def ckpt_prune(
    job: Annotated[str, typer.Argument(help="the job (its directory's name, <name>-<id>)")],
    keep: Annotated[int, typer.Option(min=1, help="checkpoints kept: the newest")] = 1,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask")] = False,
    stack: StackOpt = None, s3: S3Opt = None, user: UserOpt = None,
    stacks_dir: StacksDirOpt = STACKS_DIR,
) -> None:
    """Delete all but the newest KEEP checkpoints of a job from S3 (and uploads that were never completed)."""
    from jobs.checkpoint_store.location import JobKey

    with _clear_errors():
        store = _store(stack, s3, stacks_dir)
        key = JobKey(user or getpass.getuser(), job)
        doomed = [m for m in store.manifests(key)][:-keep]
        if doomed and not yes:
            names = ", ".join(m.checkpoint for m in doomed)
            if not typer.confirm(f"delete {names} of {key.user}/{key.job} from {store.location}?", err=True):
                raise typer.Exit(1)
        pruned = store.prune(key, keep)
    errors.print(f"pruned {', '.join(pruned) if pruned else 'nothing'} from {store.location}", highlight=False,
                 markup=False)  # fmt: skip
