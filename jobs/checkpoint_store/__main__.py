"""`python -m jobs.checkpoint_store restore|watch`: what the rendered job script runs (jobs/templates/
checkpoint_sync.sh) in the job's own image. Credentials, region and endpoint come from boto3's usual chain
(AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE, AWS_REGION, AWS_ENDPOINT_URL_S3). Exit 0 on success, 1 on a failed
restore (the script then refuses to start training from step 0 over a job that has checkpoints), 2 on bad
arguments."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from jobs.checkpoint_store.codec import Compression
from jobs.checkpoint_store.location import JobKey, LocationError, S3Location
from jobs.checkpoint_store.sync import ROUND_ERRORS, restore_if_missing, watch


def _log(message: str) -> None:
    print(f"slurm-eks ckpt: {message}", flush=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m jobs.checkpoint_store",
                                description="a job's checkpoints to and from S3 (jobs/checkpoint_store)")
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("restore", "watch"):
        s = sub.add_parser(name)
        s.add_argument("--s3", required=True, help="s3://bucket/prefix")
        s.add_argument("--job-dir", required=True, type=Path, help="the job's checkpoint directory")
        s.add_argument("--user", default=None, help="whose job (default: who runs this)")
    w = sub.choices["watch"]
    w.add_argument("--interval", type=float, default=300.0, help="seconds between copies (default 300)")
    w.add_argument("--keep", type=int, default=3, help="checkpoints kept in S3 (default 3)")
    w.add_argument("--compression", choices=("zstd", "off"), default="zstd")
    w.add_argument("--level", type=int, default=3, help="zstd level (default 3)")
    w.add_argument("--finish", type=Path, required=True, help="when this file exists: one last copy, then exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "watch" and (args.interval <= 0 or args.keep < 1):
        print("error: --interval must be > 0 and --keep >= 1", file=sys.stderr)
        return 2
    try:
        location = S3Location.parse(args.s3)
        job = JobKey(args.user or getpass.getuser(), args.job_dir.name)
    except LocationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    import boto3  # here: --help and bad arguments answer without loading botocore

    compression = Compression(enabled=getattr(args, "compression", "zstd") == "zstd", level=getattr(args, "level", 3))
    from jobs.checkpoint_store.store import CheckpointStore

    store = CheckpointStore(boto3.client("s3"), location, compression)
    if args.command == "restore":
        try:
            restore_if_missing(store, job, args.job_dir, _log)
        except ROUND_ERRORS as exc:
            print(f"slurm-eks ckpt: restoring {job.user}/{job.job} from {location} failed: {exc}", file=sys.stderr)
            return 1
        return 0
    watch(store, job, args.job_dir, interval=args.interval, keep=args.keep, finish=args.finish, log=_log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
