"""docs/operating.md's "Changing a running cluster" table is the one generated from the update policies."""

from __future__ import annotations

from components.config import update_policy
from scripts.change import policy_doc


def test_the_doc_holds_the_generated_table() -> None:
    text = policy_doc.DOC.read_text()
    assert policy_doc.rewritten(text) == text, (
        "docs/operating.md's update-policy table is stale: run `python -m scripts.change.policy_doc`")


def test_the_table_changes_with_a_policy() -> None:
    rendered = policy_doc.render()
    assert all(f"| `{key}` |" in rendered for key in update_policy.POLICIES)
    saved = dict(update_policy.POLICIES)
    try:
        update_policy.POLICIES["region"] = update_policy.LIVE
        assert policy_doc.render() != rendered
    finally:
        update_policy.POLICIES.clear()
        update_policy.POLICIES.update(saved)
