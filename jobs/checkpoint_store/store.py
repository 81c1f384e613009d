"""A job's checkpoints in S3 (layout: jobs/checkpoint_store/location.py): uploaded file by file and committed by
a manifest written last (sizes and SHA-256 of every file, checked on the way back), listed, restored into place
atomically, pruned to the newest `keep`. The S3 calls are boto3's (upload_fileobj's managed multipart transfer;
botocore adds its CRC checksums to uploads by default since 1.36, so S3 rejects a corrupted part in flight)."""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from jobs.checkpoint_layout import CheckpointDir, is_complete, step_of, step_of_relative
from jobs.checkpoint_store.codec import IDENTITY, ZSTD, Compression, decode_file, encoded_reader
from jobs.checkpoint_store.location import MANIFEST, JobKey, S3Location

FORMAT = 1
_DELETE_BATCH = 1000  # DeleteObjects takes at most 1,000 keys a request (S3 API Reference, DeleteObjects)


class StoreError(RuntimeError):
    """What went wrong with a store operation, in a line that names the checkpoint and what to do."""


@dataclass(frozen=True)
class StoredFile:
    path: str  # relative to the checkpoint directory
    size: int  # of the original
    sha256: str  # of the original
    encoding: str  # identity | zstd
    stored_size: int  # of the object in S3


@dataclass(frozen=True)
class Manifest:
    user: str
    job: str
    checkpoint: str  # relative to the job's directory: step-40, checkpoint/step-40, checkpoint-40
    step: int
    files: tuple[StoredFile, ...]
    created: str  # ISO 8601, UTC
    source: str  # host:directory it was copied from
    format: int = FORMAT

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def stored_size(self) -> int:
        return sum(f.stored_size for f in self.files)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, where: str) -> Manifest:
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise StoreError(f"{where}: manifest format {data.get('format')!r}, this slurm-eks reads {FORMAT}")
            files = tuple(StoredFile(**f) for f in data.pop("files"))
            return cls(files=files, **data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StoreError(f"{where}: not a checkpoint manifest ({exc})") from None


def trusted(manifest: Manifest, job: JobKey, where: str, key: str | None = None,
            location: S3Location | None = None) -> None:
    """Refuse a manifest read back from S3 that is not `job`'s own checkpoint: another user's or job's, a
    checkpoint path no trainer writes (absolute, `..`, elsewhere: jobs/checkpoint_layout.py), a step that is not
    its directory's, a file outside it, or (with `key`) one stored under another checkpoint's key."""
    def refuse(what: str) -> StoreError:
        return StoreError(f"{where}: {what}; not restored. Delete the object if you did not write it")

    if (manifest.user, manifest.job) != (job.user, job.job):
        raise refuse(f"it is the manifest of {manifest.user}/{manifest.job}, not of {job.user}/{job.job}")
    if step_of_relative(manifest.checkpoint) != manifest.step:
        raise refuse(f"checkpoint {manifest.checkpoint!r} (step {manifest.step}) is not a trainer's checkpoint "
                     "directory (step-<n>, checkpoint/step-<n> or checkpoint-<n>, relative to the job's directory)")
    for stored in manifest.files:
        parts = PurePosixPath(stored.path).parts
        if not parts or stored.path.startswith("/") or ".." in parts or "\\" in stored.path:
            raise refuse(f"file {stored.path!r} is not a path inside the checkpoint")
    if key is not None and location is not None and key != job.checkpoint_prefix(location, manifest.checkpoint) \
            + MANIFEST:
        raise refuse(f"it names checkpoint {manifest.checkpoint!r}, which is not where it is stored")


def _object_key(location: S3Location, job: JobKey, checkpoint: str, path: str, encoding: str) -> str:
    return job.checkpoint_prefix(location, checkpoint) + path + (".zst" if encoding == ZSTD else "")


def _checkpoint_of(relative_key: str) -> str | None:
    """The checkpoint directory a key below a job's prefix belongs to (up to the first step-<n> or checkpoint-<n>)."""
    parts = relative_key.split("/")
    for i, part in enumerate(parts[:-1]):
        if step_of(part) is not None:
            return "/".join(parts[: i + 1])
    return None


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


class CheckpointStore:
    """One S3 location's checkpoints, through a boto3 S3 client."""

    def __init__(self, client: Any, location: S3Location, compression: Compression | None = None) -> None:
        self.s3 = client
        self.location = location
        self.compression = compression or Compression()

    # -- reading ---------------------------------------------------------------------------------------------
    def _keys(self, prefix: str) -> Iterator[str]:
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.location.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield item["Key"]

    def manifests(self, job: JobKey) -> list[Manifest]:
        """The job's complete checkpoints in S3, oldest step first; a manifest that is not this job's own (another
        user or job, a checkpoint path the trainers never write, a key it does not belong at) is refused."""
        found = []
        for key in self._keys(job.prefix(self.location)):
            if key.endswith("/" + MANIFEST):
                body = self.s3.get_object(Bucket=self.location.bucket, Key=key)["Body"].read()
                where = f"s3://{self.location.bucket}/{key}"
                manifest = Manifest.from_json(body, where)
                trusted(manifest, job, where, key=key, location=self.location)
                found.append(manifest)
        return sorted(found, key=lambda m: (m.step, m.checkpoint))

    def has(self, job: JobKey, checkpoint: str) -> bool:
        key = job.checkpoint_prefix(self.location, checkpoint) + MANIFEST
        listed = self.s3.list_objects_v2(Bucket=self.location.bucket, Prefix=key, MaxKeys=1)
        return any(item["Key"] == key for item in listed.get("Contents", []))

    def jobs(self, user: str | None = None) -> list[JobKey]:
        """Every job with anything stored, of one user or of all."""
        paginator = self.s3.get_paginator("list_objects_v2")
        users = [user] if user else [
            p["Prefix"].rstrip("/").rsplit("/", 1)[-1]
            for page in paginator.paginate(Bucket=self.location.bucket, Prefix=self.location.key() + "/"
                                           if self.location.prefix else "", Delimiter="/")
            for p in page.get("CommonPrefixes", [])]  # fmt: skip
        found = []
        for name in users:
            under = self.location.key(name) + "/"
            for page in paginator.paginate(Bucket=self.location.bucket, Prefix=under, Delimiter="/"):
                found += [JobKey(name, p["Prefix"][len(under):].rstrip("/")) for p in page.get("CommonPrefixes", [])]
        return sorted(found, key=lambda j: (j.user, j.job))

    # -- writing ---------------------------------------------------------------------------------------------
    def upload(self, job: JobKey, checkpoint: CheckpointDir) -> Manifest:
        """Copy a complete checkpoint directory, then commit it with its manifest. Refuses an incomplete one; a
        file that changes or disappears meanwhile (the trainer pruned it) aborts without committing."""
        if not is_complete(checkpoint.path):
            raise StoreError(f"{checkpoint.path} is not complete (no commit marker): only complete checkpoints "
                             "are copied")  # fmt: skip
        stored: list[StoredFile] = []
        for path in _files(checkpoint.path):
            relative = path.relative_to(checkpoint.path).as_posix()
            try:
                before = path.stat().st_size
                encoding = self.compression.encoding_for(str(path))
                key = _object_key(self.location, job, checkpoint.relative, relative, encoding)
                with path.open("rb") as source:
                    hashing, body = encoded_reader(source, encoding, self.compression.level)
                    self.s3.upload_fileobj(body, self.location.bucket, key)
            except FileNotFoundError:
                raise StoreError(f"{path} went away while it was copied (pruned by the trainer?): not "
                                 "committed") from None  # fmt: skip
            if hashing.size != before or path.stat().st_size != before:
                raise StoreError(f"{path} changed while it was copied: not committed")
            head = self.s3.head_object(Bucket=self.location.bucket, Key=key)
            stored_size = int(head["ContentLength"])
            if encoding == IDENTITY and stored_size != before:
                raise StoreError(f"s3://{self.location.bucket}/{key} holds {stored_size} bytes of {before}: "
                                 "not committed")  # fmt: skip
            stored.append(StoredFile(relative, before, hashing.sha256.hexdigest(), encoding, stored_size))
        manifest = Manifest(job.user, job.job, checkpoint.relative, checkpoint.step, tuple(stored),
                            datetime.now(UTC).isoformat(timespec="seconds"),
                            f"{socket.gethostname()}:{checkpoint.path}")  # fmt: skip
        self.s3.put_object(Bucket=self.location.bucket, Key=job.checkpoint_prefix(self.location,
                           checkpoint.relative) + MANIFEST, Body=manifest.to_json().encode(),
                           ContentType="application/json")  # fmt: skip
        return manifest

    def restore(self, manifest: Manifest, job_dir: Path, job: JobKey) -> Path:
        """Download a checkpoint of `job` into `job_dir/<its relative path>`, every file checked against the
        manifest, into a temporary sibling renamed into place at the end (a torn directory of the same step is
        replaced). Nothing the manifest says is trusted: it must be `job`'s, and its checkpoint must resolve to a
        trainer's directory inside `job_dir`."""
        where = f"the manifest of {manifest.checkpoint!r} in {self.location}"
        trusted(manifest, job, where)
        final = job_dir / manifest.checkpoint
        if not final.parent.resolve().is_relative_to(job_dir.resolve()) or final.is_symlink():
            raise StoreError(f"{where}: {final} leads outside {job_dir} (a link on the way): not restored")
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.with_name(f".{final.name}.restoring-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            for stored in manifest.files:
                target = staging / stored.path
                if not target.resolve().is_relative_to(staging.resolve()):
                    raise StoreError(f"manifest of {manifest.checkpoint} names {stored.path!r}, outside the checkpoint")
                target.parent.mkdir(parents=True, exist_ok=True)
                part = target.with_name(target.name + ".part")
                key = _object_key(self.location, job, manifest.checkpoint, stored.path, stored.encoding)
                self.s3.download_file(self.location.bucket, key, str(part))
                sha256, size = decode_file(str(part), str(target), stored.encoding)
                part.unlink()
                if (sha256, size) != (stored.sha256, stored.size):
                    raise StoreError(f"s3://{self.location.bucket}/{key} does not match its manifest (sha256 "
                                     f"{sha256[:12]}.. of {size} bytes, expected {stored.sha256[:12]}.. of "
                                     f"{stored.size}): restore an older step with --step")  # fmt: skip
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return final

    def prune(self, job: JobKey, keep: int) -> list[str]:
        """Delete all but the newest `keep` complete checkpoints, and uploads older than the newest that were
        never committed. Each manifest goes first, so a checkpoint is never listed without all its files."""
        if keep < 1:
            raise StoreError(f"keep {keep}: keep at least 1 checkpoint (the newest is what a job resumes from)")
        manifests = self.manifests(job)
        doomed = {m.checkpoint for m in manifests[:-keep]}
        newest = manifests[-1].step if manifests else None
        committed = {m.checkpoint for m in manifests}
        by_checkpoint: dict[str, list[str]] = {}
        prefix = job.prefix(self.location)
        for key in self._keys(prefix):
            checkpoint = _checkpoint_of(key[len(prefix):])
            if checkpoint is not None:
                by_checkpoint.setdefault(checkpoint, []).append(key)
        for checkpoint in by_checkpoint:
            step = step_of(checkpoint.rsplit("/", 1)[-1])
            if checkpoint not in committed and newest is not None and step is not None and step < newest:
                doomed.add(checkpoint)
        for checkpoint in sorted(doomed):
            keys = sorted(by_checkpoint.get(checkpoint, []), key=lambda k: not k.endswith("/" + MANIFEST))
            manifest_keys = [k for k in keys if k.endswith("/" + MANIFEST)]
            if manifest_keys:
                self.s3.delete_object(Bucket=self.location.bucket, Key=manifest_keys[0])
            rest = [k for k in keys if k not in manifest_keys]
            for i in range(0, len(rest), _DELETE_BATCH):
                self.s3.delete_objects(Bucket=self.location.bucket, Delete={
                    "Objects": [{"Key": k} for k in rest[i:i + _DELETE_BATCH]], "Quiet": True})
        return sorted(doomed, key=lambda c: step_of(c.rsplit("/", 1)[-1]) or 0)
