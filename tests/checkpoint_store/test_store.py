"""The checkpoint store against moto's S3: what is copied (complete checkpoints only, verified, compressed where it
pays), listed, restored bit for bit, pruned; and each refusal firing on a fixture."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from jobs.checkpoint_layout import checkpoint_dirs, complete_checkpoints
from jobs.checkpoint_store.codec import IDENTITY, ZSTD, Compression
from jobs.checkpoint_store.location import MANIFEST, JobKey, LocationError, S3Location
from jobs.checkpoint_store.store import CheckpointStore, StoreError
from jobs.checkpoint_store.sync import restore_if_missing, sync_newest, watch
from tests.checkpoint_store.conftest import BUCKET

LOCATION = S3Location.parse(f"s3://{BUCKET}/checkpoints")
JOB = JobKey("alice", "llama-1234")


def write_checkpoint(job_dir: Path, relative: str, marker: str = ".metadata", seed: int = 0) -> Path:
    """A checkpoint directory as DCP writes one: incompressible shards, a compressible JSON, the marker last."""
    path = job_dir / relative
    (path / "sub").mkdir(parents=True)
    (path / "__0_0.distcp").write_bytes(os.urandom(300_000) + bytes([seed]))
    log = {"log": [{"step": i, "loss": 1.0} for i in range(4000)]}
    (path / "sub" / "trainer_state.json").write_text(json.dumps(log))
    (path / marker).write_bytes(b"commit" + bytes([seed]))
    return path


def tree(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}  # fmt: skip


def keys(s3: Any) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def test_a_complete_checkpoint_round_trips_bit_for_bit(s3: Any, tmp_path: Path) -> None:
    job_dir = tmp_path / JOB.job
    original = write_checkpoint(job_dir, "step-40")
    store = CheckpointStore(s3, LOCATION)
    manifest = store.upload(JOB, complete_checkpoints(job_dir)[0])

    assert manifest.checkpoint == "step-40" and manifest.step == 40
    encodings = {f.path: f.encoding for f in manifest.files}
    # random shards are stored as they are, JSON is compressed: each file judged on its own
    assert encodings == {"__0_0.distcp": IDENTITY, "sub/trainer_state.json": ZSTD, ".metadata": IDENTITY}
    json_file = next(f for f in manifest.files if f.encoding == ZSTD)
    assert json_file.stored_size < json_file.size / 5
    assert f"checkpoints/alice/llama-1234/step-40/{MANIFEST}" in keys(s3)
    assert "checkpoints/alice/llama-1234/step-40/sub/trainer_state.json.zst" in keys(s3)

    restored = store.restore(store.manifests(JOB)[0], tmp_path / "elsewhere" / JOB.job, JOB)
    assert tree(restored) == tree(original)
    assert not list(restored.parent.glob(".*restoring*"))


def test_compression_off_stores_every_file_as_it_is(s3: Any, tmp_path: Path) -> None:
    write_checkpoint(tmp_path, "checkpoint-7", marker=".complete")
    manifest = CheckpointStore(s3, LOCATION, Compression(enabled=False)).upload(JOB, complete_checkpoints(tmp_path)[0])
    assert {f.encoding for f in manifest.files} == {IDENTITY}
    assert all(f.stored_size == f.size for f in manifest.files)


def test_every_trainers_layout_is_found_and_restored_where_it_was(s3: Any, tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    write_checkpoint(job_dir, "checkpoint/step-30")  # torchtitan
    write_checkpoint(job_dir, "checkpoint-20", marker=".complete")  # the Trainer
    write_checkpoint(job_dir, "step-10", marker=".complete")  # the XLA path
    torn = write_checkpoint(job_dir, "step-50")
    (torn / ".metadata").unlink()
    assert [c.relative for c in complete_checkpoints(job_dir)] == ["step-10", "checkpoint-20", "checkpoint/step-30"]

    store = CheckpointStore(s3, LOCATION)
    for checkpoint in complete_checkpoints(job_dir):
        store.upload(JOB, checkpoint)
    with pytest.raises(StoreError, match="not complete"):
        store.upload(JOB, next(c for c in checkpoint_dirs(job_dir) if c.step == 50))
    assert [m.checkpoint for m in store.manifests(JOB)] == ["step-10", "checkpoint-20", "checkpoint/step-30"]

    fresh = tmp_path / "fresh" / "job"
    restore_if_missing(store, JOB, fresh, lambda _: None)
    assert tree(fresh / "checkpoint" / "step-30") == tree(job_dir / "checkpoint" / "step-30")


def test_a_corrupted_object_is_refused_on_restore(s3: Any, tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "job", "step-5")
    store = CheckpointStore(s3, LOCATION)
    manifest = store.upload(JOB, complete_checkpoints(tmp_path / "job")[0])
    s3.put_object(Bucket=BUCKET, Key="checkpoints/alice/llama-1234/step-5/__0_0.distcp", Body=b"bit rot")
    target = tmp_path / "restore" / "job"
    with pytest.raises(StoreError, match=r"does not match its manifest .* restore an older step"):
        store.restore(manifest, target, JOB)
    assert not (target / "step-5").exists(), "nothing half written is left where a job would resume from it"
    assert not list((target).glob(".*"))


def test_a_file_pruned_while_copying_is_not_committed(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_checkpoint(tmp_path / "job", "step-5")
    store = CheckpointStore(s3, LOCATION)
    real_upload = s3.upload_fileobj

    def upload_then_prune(body: Any, bucket: str, key: str) -> None:
        real_upload(body, bucket, key)
        if key.endswith("__0_0.distcp"):
            (path / "sub" / "trainer_state.json").unlink()

    monkeypatch.setattr(s3, "upload_fileobj", upload_then_prune)
    with pytest.raises(StoreError, match="went away while it was copied"):
        store.upload(JOB, complete_checkpoints(tmp_path / "job")[0])
    assert store.manifests(JOB) == []


def test_sync_copies_the_newest_once_and_keeps_the_newest_n(s3: Any, tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    store = CheckpointStore(s3, LOCATION)
    lines: list[str] = []
    for step in (10, 20, 30, 40):
        write_checkpoint(job_dir, f"step-{step}", seed=step)
        assert sync_newest(store, JOB, job_dir, keep=2, log=lines.append) is not None
        assert sync_newest(store, JOB, job_dir, keep=2, log=lines.append) is None  # already there
    assert [m.step for m in store.manifests(JOB)] == [30, 40]
    assert not [k for k in keys(s3) if "/step-10/" in k or "/step-20/" in k]
    assert any("pruned step-10" in line for line in lines)


def test_prune_removes_uploads_never_committed_but_not_one_in_flight(s3: Any, tmp_path: Path) -> None:
    store = CheckpointStore(s3, LOCATION)
    write_checkpoint(tmp_path / "job", "step-20")
    store.upload(JOB, complete_checkpoints(tmp_path / "job")[0])
    s3.put_object(Bucket=BUCKET, Key="checkpoints/alice/llama-1234/step-10/__0_0.distcp", Body=b"torn")  # crashed
    s3.put_object(Bucket=BUCKET, Key="checkpoints/alice/llama-1234/step-30/__0_0.distcp", Body=b"uploading")
    assert store.prune(JOB, keep=5) == ["step-10"]
    remaining = keys(s3)
    assert not [k for k in remaining if "/step-10/" in k]
    assert "checkpoints/alice/llama-1234/step-30/__0_0.distcp" in remaining
    with pytest.raises(StoreError, match="keep at least 1"):
        store.prune(JOB, keep=0)


def test_restore_if_missing_prefers_the_shared_file_system(s3: Any, tmp_path: Path) -> None:
    store = CheckpointStore(s3, LOCATION)
    job_dir = tmp_path / "job"
    lines: list[str] = []
    assert restore_if_missing(store, JOB, job_dir, lines.append) is None
    assert "starting afresh" in lines[-1]
    write_checkpoint(job_dir, "step-10")
    sync_newest(store, JOB, job_dir, keep=3, log=lines.append)
    assert restore_if_missing(store, JOB, job_dir, lines.append) is None
    assert "resuming from step-10 on the shared file system" in lines[-1]


def test_jobs_are_listed_per_user(s3: Any, tmp_path: Path) -> None:
    store = CheckpointStore(s3, LOCATION)
    write_checkpoint(tmp_path / "a", "step-1")
    for job in (JOB, JobKey("alice", "other-9"), JobKey("bob", "vision-3")):
        store.upload(job, complete_checkpoints(tmp_path / "a")[0])
    assert store.jobs() == [JOB, JobKey("alice", "other-9"), JobKey("bob", "vision-3")]
    assert store.jobs("bob") == [JobKey("bob", "vision-3")]
    assert CheckpointStore(s3, S3Location.parse(f"s3://{BUCKET}/elsewhere")).jobs() == []


def test_watch_copies_on_its_interval_and_once_more_when_finishing(s3: Any, tmp_path: Path) -> None:
    store = CheckpointStore(s3, LOCATION)
    job_dir = tmp_path / "job"
    write_checkpoint(job_dir, "step-10")
    finish = job_dir / "FINISH"
    ticks: list[int] = []

    def log(line: str) -> None:
        ticks.append(len(ticks))
        if "step-10" in line:  # after the first copy, training writes its last checkpoint and finishes
            write_checkpoint(job_dir, "step-20", seed=2)
            finish.touch()

    watch(store, JOB, job_dir, interval=3600, keep=3, finish=finish, log=log, tick=0.01)
    assert [m.step for m in store.manifests(JOB)] == [10, 20]


def test_watch_survives_a_failing_round(s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = CheckpointStore(s3, LOCATION)
    job_dir = tmp_path / "job"
    write_checkpoint(job_dir, "step-10")
    (job_dir / "FINISH").touch()
    monkeypatch.setattr(store, "upload", lambda *_: (_ for _ in ()).throw(OSError("connection reset")))
    lines: list[str] = []
    watch(store, JOB, job_dir, interval=1, keep=3, finish=job_dir / "FINISH", log=lines.append, tick=0.01)
    assert lines == [f"copy to {LOCATION} failed, giving up: connection reset"]


@pytest.mark.parametrize(("uri", "message"), [
    ("s3:/bucket", "is not an S3 location"), ("https://bucket/x", "is not an S3 location"),
    ("s3://UPPER/x", "is not an S3 location")])  # fmt: skip
def test_bad_locations_are_refused(uri: str, message: str) -> None:
    with pytest.raises(LocationError, match=message):
        S3Location.parse(uri)


@pytest.mark.parametrize(("user", "job"), [("alice", ".."), ("al/ice", "j"), ("alice", "a b")])
def test_names_that_would_leave_the_prefix_are_refused(user: str, job: str) -> None:
    with pytest.raises(LocationError, match="cannot name an S3 key segment"):
        JobKey(user, job)


def test_a_manifest_naming_a_path_outside_the_checkpoint_is_refused(s3: Any, tmp_path: Path) -> None:
    store = CheckpointStore(s3, LOCATION)
    write_checkpoint(tmp_path / "job", "step-1")
    manifest = store.upload(JOB, complete_checkpoints(tmp_path / "job")[0])
    evil = manifest.__class__(**{**manifest.__dict__, "files": (
        manifest.files[0].__class__("../../escape", 1, "0" * 64, IDENTITY, 1),)})
    with pytest.raises(StoreError, match="is not a path inside the checkpoint"):
        store.restore(evil, tmp_path / "restore" / "job", JOB)
    assert not (tmp_path / "restore" / "escape").exists()


def plant(s3: Any, job: JobKey, key_checkpoint: str, fields: dict[str, Any]) -> str:
    """A manifest written under `job`'s prefix by someone else (every job held the same role before per-person
    credentials: docs/security.md), with the fields they chose; its key."""
    body = {"format": 1, "user": job.user, "job": job.job, "checkpoint": key_checkpoint, "step": 1, "files": [],
            "created": "2026-12-07T00:00:00+00:00", "source": "x:/y"}
    body.update(fields)
    key = job.checkpoint_prefix(LOCATION, key_checkpoint) + MANIFEST
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(body).encode())
    return key


@pytest.mark.parametrize(("fields", "refusal"), [
    ({"checkpoint": "../../images/alice"}, "is not a trainer's checkpoint directory"),
    ({"checkpoint": "/shared/images/alice"}, "is not a trainer's checkpoint directory"),
    ({"checkpoint": "code/step-1"}, "is not a trainer's checkpoint directory"),
    ({"checkpoint": "step-1", "step": 9}, "is not a trainer's checkpoint directory"),
    ({"user": "mallory"}, "it is the manifest of mallory/llama-1234, not of alice/llama-1234"),
    ({"job": "other-1"}, "it is the manifest of alice/other-1, not of alice/llama-1234"),
    ({"checkpoint": "step-2", "step": 2}, "which is not where it is stored"),
])
def test_a_planted_manifest_is_refused_naming_its_object(s3: Any, tmp_path: Path, fields: dict[str, Any],
                                                         refusal: str) -> None:
    """Restore trusts nothing it reads back: a manifest under the job's prefix whose user, job, checkpoint or key
    is not the job's own stops the restore, naming the object, before anything is written."""
    key = plant(s3, JOB, "step-1", fields)
    store = CheckpointStore(s3, LOCATION)
    job_dir = tmp_path / "alice" / JOB.job
    with pytest.raises(StoreError, match=refusal) as refused:
        restore_if_missing(store, JOB, job_dir, lambda _line: None)
    assert f"s3://{BUCKET}/{key}" in str(refused.value)
    assert not (tmp_path / "alice").exists(), "nothing was written"


def test_restore_refuses_a_manifest_of_another_job_handed_to_it(s3: Any, tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "job", "step-3")
    store = CheckpointStore(s3, LOCATION)
    manifest = store.upload(JOB, complete_checkpoints(tmp_path / "job")[0])
    with pytest.raises(StoreError, match="not of bob/llama-1234"):
        store.restore(manifest, tmp_path / "bob", JobKey("bob", "llama-1234"))


def test_restore_refuses_a_link_out_of_the_job_directory(s3: Any, tmp_path: Path) -> None:
    write_checkpoint(tmp_path / "job", "checkpoint/step-3")
    store = CheckpointStore(s3, LOCATION)
    manifest = store.upload(JOB, complete_checkpoints(tmp_path / "job")[0])
    job_dir, elsewhere = tmp_path / "restore", tmp_path / "victim"
    job_dir.mkdir()
    elsewhere.mkdir()
    (job_dir / "checkpoint").symlink_to(elsewhere)
    with pytest.raises(StoreError, match="leads outside"):
        store.restore(manifest, job_dir, JOB)
    assert list(elsewhere.iterdir()) == []
