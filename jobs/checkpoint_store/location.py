"""Where a job's checkpoints live in S3: `s3://<bucket>/<prefix>/<user>/<job>/<checkpoint>/`, one directory per
checkpoint (its path relative to the job's directory: `step-40`, `checkpoint/step-40`, `checkpoint-40`) with the
files under their relative paths and MANIFEST last. `<job>` is the name of the job's checkpoint directory
(`<job name>-<job id>` by default): a requeue keeps it, so every attempt of one job shares its copies."""

from __future__ import annotations

import re
from dataclasses import dataclass

MANIFEST = "slurm-eks-manifest.json"  # written last: a checkpoint without it in S3 is incomplete
# Bucket names (S3 User Guide, "General purpose bucket naming rules": 3-63 characters, lowercase letters,
# numbers, dots and hyphens, beginning and ending with a letter or number).
_S3_URI = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?$")
# A user or job name as a single key segment: no slashes, nothing that climbs out of the prefix.
_SEGMENT = re.compile(r"^[A-Za-z0-9_.=+-]+$")


class LocationError(ValueError):
    """A bad S3 URI, user or job name; the message names the value and the fix."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str  # without leading or trailing slash; may be empty

    @classmethod
    def parse(cls, uri: str) -> S3Location:
        match = _S3_URI.match(uri)
        if not match:
            raise LocationError(f"{uri!r} is not an S3 location: use s3://bucket/prefix")
        return cls(match.group(1), (match.group(2) or "").strip("/"))

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)


def segment(value: str, what: str) -> str:
    """`value` as one key segment, or a LocationError naming `what`."""
    if value in (".", "..") or not _SEGMENT.match(value):
        raise LocationError(f"{what} {value!r} cannot name an S3 key segment: use letters, digits and . _ = + -")
    return value


@dataclass(frozen=True)
class JobKey:
    """One job's checkpoints: `<user>/<job>` under the location's prefix."""

    user: str
    job: str

    def __post_init__(self) -> None:
        segment(self.user, "user")
        segment(self.job, "job")

    def prefix(self, location: S3Location) -> str:
        return location.key(self.user, self.job) + "/"

    def checkpoint_prefix(self, location: S3Location, relative: str) -> str:
        return location.key(self.user, self.job, relative) + "/"
