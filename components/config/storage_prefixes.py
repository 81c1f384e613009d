"""Where a stack keeps data in S3, and whether two stacks' locations overlap. Every `s3://` value under the stack's
`slurm-eks:cluster` counts, whatever its key (today `storage.fsx.repositories[].s3`, `storage.checkpointStore.s3`,
`addons.mlflow.artifacts`), so a key added later is covered without a change here. Sibling stack files are read
leniently: one that is not YAML or does not validate gives what S3 values it has, never an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components.config.keys import FULL_KEY

S3 = "s3://"

Location = tuple[str, str]  # (config path, s3://bucket/prefix)


def s3_locations(value: Any, path: str = "") -> list[Location]:
    """Every string under `value` that is an S3 URI, with its config path, in document order."""
    if isinstance(value, dict):
        return [hit for key, v in value.items() for hit in s3_locations(v, f"{path}.{key}" if path else str(key))]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in s3_locations(v, f"{path}[{i}]")]
    return [(path, value)] if isinstance(value, str) and value.startswith(S3) else []


def split(uri: str) -> tuple[str, list[str]]:
    """s3://bucket/a/b/ -> ("bucket", ["a", "b"])."""
    bucket, _, prefix = uri.removeprefix(S3).partition("/")
    return bucket, [part for part in prefix.split("/") if part]


def overlap(a: str, b: str) -> bool:
    """One location equal to, or a whole-segment prefix of, the other (a bucket alone covers all of it)."""
    (bucket_a, parts_a), (bucket_b, parts_b) = split(a), split(b)
    shorter = min(len(parts_a), len(parts_b))
    return bucket_a == bucket_b and parts_a[:shorter] == parts_b[:shorter]


def sibling_locations(stack: str, stacks_dir: Path) -> dict[str, list[Location]]:
    """Each other stack file's S3 locations in `stacks_dir`, by stack name."""
    found: dict[str, list[Location]] = {}
    for path in sorted(stacks_dir.glob("Pulumi.*.yaml")):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        if name == stack:
            continue
        try:
            document = yaml.safe_load(path.read_text())
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # not ours to judge here: its own validation says what is wrong with it
        config = document.get("config") if isinstance(document, dict) else None
        cluster = config.get(FULL_KEY) if isinstance(config, dict) else None
        found[name] = s3_locations(cluster)
    return found


def moved(uri: str, source: str, name: str) -> str:
    """`uri` of stack `source` as a location of stack `name`: a path segment (else a part of the bucket's name,
    split at '-' and '.') equal to `source` renamed, otherwise `name` put in front of the prefix."""
    bucket, parts = split(uri)
    if source in parts:
        parts = [name if part == source else part for part in parts]
    elif source in bucket.replace(".", "-").split("-"):
        bucket = ".".join("-".join(name if w == source else w for w in dotted.split("-"))
                          for dotted in bucket.split("."))
    else:
        parts = [name, *parts]
    slash = "/" if uri.endswith("/") else ""
    return f"{S3}{bucket}/{'/'.join(parts)}{slash}" if parts else f"{S3}{bucket}{slash}"
