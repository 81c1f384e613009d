"""Rules on the MLflow tracking server (`addons.mlflow`, components/config/mlflow.py): its artifact location, its
database and the nodes it runs on."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from components.config.cluster import ClusterConfig
from components.config.mlflow import S3_SCHEME, split_s3
from components.config.rules.registry import Found, known_types, rule

MLFLOW = "addons.mlflow"
# General purpose bucket naming rules (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html): 3 to
# 63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit, no two adjacent dots,
# not an IP address, none of the reserved prefixes and suffixes.
BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
# One segment of the prefix: S3's safe key characters ("Creating object key names", docs.aws.amazon.com/AmazonS3/
# latest/userguide/object-keys.html: letters, digits and ! - _ . * ' ( )) less `*`, which the server's IAM policy
# would read as a wildcard (the prefix is written into its resource ARNs).
PREFIX_SEGMENT = re.compile(r"^[A-Za-z0-9!_.'()-]+$")


def bucket_problem(bucket: str) -> str | None:
    """Why S3 would refuse `bucket` as a general purpose bucket's name, or None."""
    if not BUCKET.match(bucket):
        return "3 to 63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit"
    if ".." in bucket:
        return "no two adjacent dots"
    try:
        ipaddress.IPv4Address(bucket)
        return "not formatted as an IP address"
    except ValueError:
        pass
    reserved = [p for p in RESERVED_BUCKET_PREFIXES if bucket.startswith(p)] + \
               [s for s in RESERVED_BUCKET_SUFFIXES if bucket.endswith(s)]
    return f"{reserved[0]} is reserved by S3" if reserved else None


def _overlaps(a: str, b: str) -> bool:
    """Whether two S3 locations (bucket, prefix) share objects: the same bucket, one prefix inside the other
    ("" is the whole bucket)."""
    (bucket_a, prefix_a), (bucket_b, prefix_b) = split_s3(a), split_s3(b)
    prefix_a, prefix_b = prefix_a.strip("/"), prefix_b.strip("/")
    return bucket_a == bucket_b and (not prefix_a or not prefix_b or prefix_a == prefix_b
                                     or prefix_a.startswith(prefix_b + "/") or prefix_b.startswith(prefix_a + "/"))


@rule("mlflow-artifacts")
def mlflow_artifacts(c: ClusterConfig) -> Iterator[Found]:
    """`artifacts` is an S3 prefix of its own: a valid bucket, a prefix the server's IAM policy can be limited to,
    and no FSx data repository's objects (FSx would import MLflow's artifacts onto /shared, or export files into
    MLflow's tree)."""
    mlflow = c.addons.mlflow
    if mlflow is None:
        return
    where, uri = f"{MLFLOW}.artifacts", mlflow.artifacts
    if not uri.startswith(S3_SCHEME):
        yield Found(where, uri, "not an S3 location: the server stores artifacts in S3 only",
                    "use s3://<bucket>/<prefix>, e.g. s3://ml-data/mlflow")
        return
    bucket, prefix = split_s3(uri)
    if problem := bucket_problem(bucket):
        yield Found(where, uri, f"{bucket!r} is not an S3 bucket name: {problem}",
                    "name the bucket as S3 does (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html)")
        return
    segments = prefix.split("/")
    if not prefix:
        yield Found(where, uri, "no prefix: the server's role would hold the whole bucket",
                    f"add a prefix of its own, e.g. s3://{bucket}/mlflow")
        return
    if any(not PREFIX_SEGMENT.match(s) or s in (".", "..") for s in segments):
        yield Found(where, uri, "the prefix needs segments of letters, digits and ! _ . ' ( ) - between single "
                    "slashes (no *, which IAM reads as a wildcard; no . or .. segments; no trailing /)",
                    f"e.g. s3://{bucket}/mlflow")
        return
    for i, repo in enumerate(c.storage.fsx.repositories):
        if _overlaps(uri, repo.s3):
            yield Found(where, uri, f"shares objects with storage.fsx.repositories[{i}] ({repo.s3}, linked at "
                        f"{repo.path}): FSx would sync MLflow's artifacts with /shared",
                        "give MLflow a prefix outside every FSx data repository's")


@rule("mlflow-database")
def mlflow_database(c: ClusterConfig) -> Iterator[Found]:
    """`rds` is a database on the accounting RDS instance, which exists only with `slurm.accounting.database: rds`."""
    mlflow = c.addons.mlflow
    if mlflow is not None and mlflow.database == "rds" and c.slurm.accounting.database != "rds":
        yield Found(f"{MLFLOW}.database", mlflow.database, "MLflow's database goes on the stack's accounting RDS, "
                    f"but slurm.accounting.database is {c.slurm.accounting.database}: there is no RDS instance",
                    f"use {MLFLOW}.database: in-cluster (SQLite on a volume), or slurm.accounting.database: rds")


@rule("mlflow-pool")
def mlflow_pool(c: ClusterConfig) -> Iterator[Found]:
    """A `pool` is one of `kubernetesPools`: the server never runs on Slurm's partitions."""
    mlflow = c.addons.mlflow
    if mlflow is not None and mlflow.pool is not None and mlflow.pool not in c.kubernetes_pools:
        yield Found(f"{MLFLOW}.pool", mlflow.pool, "not a Kubernetes pool: the server never runs on Slurm's "
                    "partitions", f"use one of kubernetesPools ({', '.join(c.kubernetes_pools) or 'none'}), or "
                    "remove pool (the system nodes)")


@rule("mlflow-pool-idle", "warning")
def mlflow_pool_idle(c: ClusterConfig) -> Iterator[Found]:
    """The server runs all the time: a pool node it runs on is never empty, so Karpenter never gives it back."""
    mlflow = c.addons.mlflow
    pool = c.kubernetes_pools.get(mlflow.pool) if mlflow is not None and mlflow.pool is not None else None
    if mlflow is None or pool is None:
        return
    types = known_types(pool)
    what = f"a {types[0].name} ({types[0].accelerators} {types[0].accelerator_model})" if types else "a node"
    yield Found(f"{MLFLOW}.pool", mlflow.pool, f"the server never stops, so {what} of pool {mlflow.pool} stays up "
                "for it: the pool's idleTimeout never starts", "remove pool: the server fits on the system nodes")
