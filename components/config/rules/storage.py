"""Rules on shared storage: FSx for Lustre (capacity, throughput, S3 repositories, backups), EFS, and S3 prefixes
no two stacks of one directory share."""

from __future__ import annotations

import re
from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.efs import MODEL_DIRECTORY
from components.config.rules.registry import Found, rule, stack_rule
from components.config.stack_context import StackContext
from components.config.storage_prefixes import moved, overlap, s3_locations, sibling_locations

FSX_THROUGHPUT = {"PERSISTENT_2": (125, 250, 500, 1000)}


FSX_MAX_REPOSITORIES = 8  # data repository associations per file system


S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?$")


@rule("fsx-capacity")
def fsx_capacity(c: ClusterConfig) -> Iterator[Found]:
    fsx = c.storage.fsx
    if fsx.capacity_gib not in (1200, 2400) and fsx.capacity_gib % 2400:
        yield Found("storage.fsx.capacityGiB", fsx.capacity_gib,
                    f"{fsx.deployment_type} (SSD) accepts 1200, 2400, or a multiple of 2400 GiB",
                    f"use 1200, 2400, 4800, 7200, ...; nearest: {_nearest_capacity(fsx.capacity_gib)}")


def _nearest_capacity(gib: int) -> int:
    allowed = [1200, *range(2400, max(gib, 2400) + 2401, 2400)]
    return min(allowed, key=lambda a: (abs(a - gib), a))


@rule("fsx-throughput")
def fsx_throughput(c: ClusterConfig) -> Iterator[Found]:
    fsx = c.storage.fsx
    allowed = FSX_THROUGHPUT.get(fsx.deployment_type)
    if allowed is None and fsx.throughput_per_tib is not None:
        yield Found("storage.fsx.throughputPerTiB", fsx.throughput_per_tib,
                    f"{fsx.deployment_type} has a fixed throughput (200 MB/s per TiB)",
                    "remove throughputPerTiB, or use deploymentType PERSISTENT_2")
    if allowed and fsx.throughput_per_tib not in allowed:
        yield Found("storage.fsx.throughputPerTiB", fsx.throughput_per_tib,
                    f"{fsx.deployment_type} needs a throughput per TiB of {', '.join(map(str, allowed))}",
                    "set throughputPerTiB to one of those (MB/s per TiB of storage)")


@rule("fsx-repositories")
def fsx_repositories(c: ClusterConfig) -> Iterator[Found]:
    fsx = c.storage.fsx
    if fsx.repositories and fsx.deployment_type != "PERSISTENT_2":
        yield Found("storage.fsx.repositories", [r.path for r in fsx.repositories],
                    "S3 data repository associations need a PERSISTENT_2 file system",
                    "use deploymentType PERSISTENT_2, or remove repositories")
    if len(fsx.repositories) > FSX_MAX_REPOSITORIES:
        yield Found("storage.fsx.repositories", len(fsx.repositories),
                    f"a file system holds at most {FSX_MAX_REPOSITORIES} data repository associations",
                    "merge prefixes into fewer repositories")
    paths: list[str] = []
    for i, repo in enumerate(fsx.repositories):
        where = f"storage.fsx.repositories[{i}]"
        if not re.fullmatch(r"/[A-Za-z0-9._/-]*[A-Za-z0-9._-]", repo.path) or "//" in repo.path:
            yield Found(f"{where}.path", repo.path, "not an absolute directory path in the file system",
                        "use a path such as /data (no trailing slash)")
        for other in paths:
            if repo.path == other or repo.path.startswith(other + "/") or other.startswith(repo.path + "/"):
                yield Found(f"{where}.path", repo.path, f"overlaps the repository at {other}",
                            "give each repository its own directory, not nested in another")
        paths.append(repo.path)
        if not S3_URI.match(repo.s3):
            yield Found(f"{where}.s3", repo.s3, "not an S3 URI", "use s3://bucket/prefix")
        if not repo.import_events and not repo.export_events:
            yield Found(where, repo.path, "neither import nor export events: the link would never sync",
                        "add import: [NEW, CHANGED, DELETED] and/or export: [NEW, CHANGED, DELETED]")


@rule("fsx-backups")
def fsx_backups(c: ClusterConfig) -> Iterator[Found]:
    fsx = c.storage.fsx
    path = "storage.fsx.automaticBackupRetentionDays"
    if not fsx.deployment_type.startswith("PERSISTENT"):
        if fsx.automatic_backup_retention_days:
            yield Found(path, fsx.automatic_backup_retention_days,
                        f"{fsx.deployment_type} file systems take no backups (FSx backs up PERSISTENT only)",
                        "remove automaticBackupRetentionDays, or use deploymentType PERSISTENT_2")
    elif not fsx.automatic_backup_retention_days:
        yield Found(path, fsx.automatic_backup_retention_days,
                    "a persistent file system without automatic backups: a deleted file is gone for good",
                    "keep at least 1 day (the default is 7)")


@rule("fsx-export-deletes")
def fsx_export_deletes(c: ClusterConfig) -> Iterator[Found]:
    for i, repo in enumerate(c.storage.fsx.repositories):
        if "DELETED" in repo.export_events:
            yield Found(f"storage.fsx.repositories[{i}].export", list(repo.export_events),
                        f"export DELETED makes every file removed under {repo.path} (a pruned checkpoint, an rm "
                        f"by mistake) delete its object in {repo.s3}: S3 would lose the only other copy",
                        "export [NEW, CHANGED] only, and prune S3 with a lifecycle rule if it must shrink")


@rule("efs-throughput")
def efs_throughput(c: ClusterConfig) -> Iterator[Found]:
    """A provisioned rate goes with, and only with, throughputMode provisioned (EFS API CreateFileSystem:
    ProvisionedThroughputInMibps is required for provisioned and refused otherwise)."""
    efs = c.storage.efs
    if efs is None:
        return
    rate = efs.provisioned_throughput_mibps
    if efs.throughput_mode == "provisioned" and rate is None:
        yield Found("storage.efs.provisionedThroughputMibps", None,
                    "throughputMode provisioned needs the rate to provision",
                    "set provisionedThroughputMibps (MiB/s), or use throughputMode elastic")
    elif efs.throughput_mode != "provisioned" and rate is not None:
        yield Found("storage.efs.provisionedThroughputMibps", rate,
                    f"throughputMode {efs.throughput_mode} takes no provisioned rate",
                    "remove provisionedThroughputMibps, or use throughputMode provisioned")


@rule("efs-performance-mode", "warning")
def efs_performance_mode(c: ClusterConfig) -> Iterator[Found]:
    # docs.aws.amazon.com/efs/latest/ug/performance.html: Max I/O has higher per-operation latencies; AWS
    # recommends General Purpose always. The mode is fixed at creation.
    if c.storage.efs is not None and c.storage.efs.performance_mode == "maxIO":
        yield Found("storage.efs.performanceMode", "maxIO",
                    "Max I/O has higher per-operation latency than General Purpose, and cannot be changed later",
                    "use performanceMode generalPurpose (the default), as AWS recommends")


@rule("efs-gid-range")
def efs_gid_range(c: ClusterConfig) -> Iterator[Found]:
    efs = c.storage.efs
    if efs is not None and efs.gid_range_start >= efs.gid_range_end:
        yield Found("storage.efs.gidRangeEnd", efs.gid_range_end,
                    f"the access point GID range is empty: it must end above gidRangeStart {efs.gid_range_start}",
                    "set gidRangeEnd above gidRangeStart (the driver's defaults: 50000 to 60000)")
    if efs is not None and efs.gid_range_start <= efs.model_owner_id <= efs.gid_range_end:
        yield Found("storage.efs.modelOwnerId", efs.model_owner_id,
                    f"the models' owner is inside the efs-ap GID range {efs.gid_range_start}-{efs.gid_range_end}: "
                    "a user's dynamically provisioned directory could act as the models' owner",
                    "pick a modelOwnerId outside gidRangeStart..gidRangeEnd (default 40000)")
    if efs is not None and f"{efs.base_path.rstrip('/')}/".startswith(f"{MODEL_DIRECTORY}/"):
        yield Found("storage.efs.basePath", efs.base_path,
                    f"dynamically provisioned directories would land inside the models' directory {MODEL_DIRECTORY}",
                    "set basePath outside /models (default /claims)")


@rule("checkpoint-store")
def checkpoint_store(c: ClusterConfig) -> Iterator[Found]:
    store = c.storage.checkpoint_store
    if store is None:
        return
    if not S3_URI.match(store.s3):
        yield Found("storage.checkpointStore.s3", store.s3, "not an S3 URI", "use s3://bucket/prefix")
        return
    mine = store.s3.rstrip("/") + "/"
    for i, repo in enumerate(c.storage.fsx.repositories):
        theirs = repo.s3.rstrip("/") + "/"
        if mine.startswith(theirs) or theirs.startswith(mine):
            # The data repository would import the store's objects into /shared (and a DELETED import or export
            # would delete copies the store counts on), or export /shared's files among the store's.
            yield Found("storage.checkpointStore.s3", store.s3,
                        f"overlaps storage.fsx.repositories[{i}] ({repo.s3}), which FSx syncs with /shared",
                        f"use a prefix of its own, such as {theirs.rstrip('/')}-store or another bucket")
    mlflow = c.addons.mlflow
    if mlflow is not None:
        theirs = mlflow.artifacts.rstrip("/") + "/"
        if mine.startswith(theirs) or theirs.startswith(mine):  # the store's prune would delete MLflow's artifacts
            yield Found("storage.checkpointStore.s3", store.s3,
                        f"overlaps addons.mlflow.artifacts ({mlflow.artifacts})", "give each its own prefix")


@stack_rule("storage-prefixes-shared")
def storage_prefixes_shared(c: ClusterConfig, stack: StackContext) -> Iterator[Found]:
    """Two stacks of one stacks directory never write the same S3 prefix: a staging cluster made from prod
    (`slurm-eks init --from prod`) would import prod's data, prune its checkpoints, mix its MLflow artifacts."""
    if stack.name is None or stack.stacks_dir is None:
        return
    mine = s3_locations(c.model_dump(by_alias=True, exclude_none=True))
    for other, theirs in sibling_locations(stack.name, stack.stacks_dir).items():
        for path, uri in mine:
            for their_path, their_uri in theirs:
                if overlap(uri, their_uri):
                    yield Found(path, uri,
                                f"overlaps stack {other}'s {their_path} ({their_uri}): stacks {stack.name} and "
                                f"{other} would read, write and prune each other's objects",
                                f"give stack {stack.name} a prefix of its own, such as "
                                f"{moved(uri, other, stack.name)}, or another bucket")
