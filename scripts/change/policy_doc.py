"""docs/operating.md's table "Changing a running cluster", generated from the update policies
(components/config/update_policy.py): `python -m scripts.change.policy_doc` rewrites it; tests/change/
test_policy_doc.py keeps it in step."""

from __future__ import annotations

from pathlib import Path

from components.config.update_policy import POLICIES, UpdatePolicy
from scripts import doc_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "operating.md"
START, END = "<!-- update-policies:start (scripts/change/policy_doc.py) -->", "<!-- update-policies:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _describe(policy: UpdatePolicy) -> str:
    words = policy.kind.label + (f": {policy.does}" if policy.does else "")
    if policy.shrink is not None:
        words += f". Removed or lowered: {policy.shrink.kind.label}" + (
            f": {policy.shrink.does}" if policy.shrink.does else "")
    return words


def _fix(policy: UpdatePolicy) -> str:
    return " ".join(filter(None, [policy.fix, policy.shrink.fix if policy.shrink else ""]))


def render() -> str:
    lines = ["| key | policy: what the change does | when refused: the fix |", "| --- | --- | --- |"]
    lines += [f"| `{key}` | {_cell(_describe(p))} | {_cell(_fix(p)) or '-'} |" for key, p in POLICIES.items()]
    return "\n".join(lines)


def rewritten(text: str) -> str:
    return doc_blocks.rewritten(text, START, END, render(), DOC)


def main() -> None:
    DOC.write_text(rewritten(DOC.read_text()))


if __name__ == "__main__":
    main()
