"""A new stack's file from an existing one (`slurm-eks init NAME --from STACK`): the same settings and comments, with
what names the stack renamed (the KMS key alias of its secrets provider, `clusterName`, `tags.environment`), every S3
location moved to a prefix of the new stack's own (components/config/storage_prefixes.py: a staging cluster made
from prod must not write into prod's buckets), and the wrapped data key (`encryptedkey:`, one per stack, which Pulumi
adds on the first command) left out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

import yaml

from components.config.keys import FULL_KEY
from components.config.storage_prefixes import moved, s3_locations

# "Stack names may only contain alphanumeric characters, hyphens, underscores, or periods" (pulumi.com/docs/iac/
# concepts/stacks); the 100-character bound in check_name is ours (a file name, a KMS alias), not Pulumi's.
STACK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class NewStackError(ValueError):
    """A name or a source that cannot make a stack."""


@dataclass(frozen=True)
class Move:
    """One S3 location the new stack takes instead of the source's."""

    path: str  # under slurm-eks:cluster
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.path}: {self.old} -> {self.new}"


def check_name(name: str) -> None:
    if not STACK_NAME.match(name) or len(name) > 100:
        raise NewStackError(f"stack name {name!r}: use letters, digits, '-', '_' or '.' (Pulumi's stack names), "
                            "such as `staging`")


def new_stack_text(name: str, source: str, source_text: str) -> str:
    """`source_text` (the file of stack `source`) as the file of stack `name`."""
    return new_stack(name, source, source_text)[0]


def new_stack(name: str, source: str, source_text: str) -> tuple[str, list[Move]]:
    """`source_text` (the file of stack `source`) as the file of stack `name`, and the S3 locations it moved."""
    check_name(name)
    moves = [Move(path, uri, moved(uri, source, name)) for path, uri in _locations(source_text, source)]
    new_uri = {m.old: m.new for m in moves}
    s3_token = re.compile(r"s3://[^\s'\"#,\]}]+")
    header = (f"# Stack {name}, made by `slurm-eks init {name} --from {source}` on "
              f"{datetime.now(UTC).date().isoformat()}.\n# Review every value below (region, address ranges, "
              "people, sizes), create its KMS key\n"
              f"# (docs/operating.md \"Secrets\"), then `slurm-eks validate --stack {name}`.\n")
    lines = []
    for line in source_text.splitlines(keepends=True):
        if line.startswith("encryptedkey:"):
            continue  # the source stack's wrapped data key: Pulumi writes this stack's own
        if line.startswith("secretsprovider:"):
            line = line.replace(f"alias/slurm-eks-{source}-pulumi", f"alias/slurm-eks-{name}-pulumi")
        elif re.match(r"^\s+environment:\s", line):
            line = re.sub(r"(environment:\s*)\S+", rf"\g<1>{name}", line)
        elif re.match(r"^\s+clusterName:\s", line):
            line = re.sub(rf"\b{re.escape(source)}\b", name, line)
        lines.append(s3_token.sub(lambda m: new_uri.get(m.group(), m.group()), line))
    text = header + "".join(lines)
    after, wanted = _locations(text, name), [(m.path, m.new) for m in moves]
    if after != wanted:  # a location the text writes in a way the line edit missed
        left = ", ".join(f"{path} ({uri})" for path, uri in after if (path, uri) not in wanted)
        raise NewStackError(f"--from {source}: could not move {left or 'every S3 location'} in the text; write the "
                            f"file by hand and give each S3 location a prefix of stack {name}'s own")
    return text, moves


def _locations(text: str, stack: str) -> list[tuple[str, str]]:
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise NewStackError(f"--from {stack}: its file is not YAML ({exc}); fix it first") from None
    config = document.get("config") if isinstance(document, dict) else None
    return s3_locations(config.get(FULL_KEY) if isinstance(config, dict) else None)
