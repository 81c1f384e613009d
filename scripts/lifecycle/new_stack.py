"""A new stack's file from an existing one (`slurm-eks init NAME --from STACK`): the same settings and comments, with
what names the stack renamed (the KMS key alias of its secrets provider, `clusterName`, `tags.environment`) and the
wrapped data key (`encryptedkey:`, one per stack, which Pulumi adds on the first command) left out."""

from __future__ import annotations

import re
from datetime import UTC, datetime

# "Stack names may only contain alphanumeric characters, hyphens, underscores, or periods" (pulumi.com/docs/iac/
# concepts/stacks); the 100-character bound in check_name is ours (a file name, a KMS alias), not Pulumi's.
STACK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class NewStackError(ValueError):
    """A name or a source that cannot make a stack."""


def check_name(name: str) -> None:
    if not STACK_NAME.match(name) or len(name) > 100:
        raise NewStackError(f"stack name {name!r}: use letters, digits, '-', '_' or '.' (Pulumi's stack names), "
                            "such as `staging`")


def new_stack_text(name: str, source: str, source_text: str) -> str:
    """`source_text` (the file of stack `source`) as the file of stack `name`."""
    check_name(name)
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
        lines.append(line)
    return header + "".join(lines)
