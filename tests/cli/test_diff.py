"""Plan diff semantics: added, removed, changed, property paths."""

from __future__ import annotations

from scripts.offline.diff import diff_plans, diff_values, render_markdown, render_text
from scripts.offline.plan_model import Plan, PlannedResource


def _res(name: str, **inputs: object) -> PlannedResource:
    return PlannedResource(f"urn:pulumi:s::p::t::{name}", "aws:x/y:Y", name, None, None, [], True, False, False,
                           dict(inputs))


def test_property_paths() -> None:
    changes = diff_values({"a": {"b": [1, 2]}, "c": 1}, {"a": {"b": [1, 3]}, "d": 2})
    assert [(c.path, c.old, c.new) for c in changes] == [("a.b[1]", 2, 3), ("c", 1, None), ("d", None, 2)]
    assert [c.path for c in diff_values({"l": [1]}, {"l": [1, 2]})] == ["l"]


def test_added_removed_changed() -> None:
    old = Plan("s", "p", [_res("keep", size=1), _res("gone")])
    new = Plan("s", "p", [_res("keep", size=2), _res("new")])
    d = diff_plans(old, new)
    assert [r.name for r in d.added] == ["new"] and [r.name for r in d.removed] == ["gone"]
    ((res, changes),) = d.changed
    assert res.name == "keep" and [c.path for c in changes] == ["inputs.size"]
    text = render_text(d)
    assert "1 to add, 1 to change, 1 to remove" in text and "+ aws:x/y:Y new" in text
    assert "| ~ | `aws:x/y:Y` | `keep` |" in render_markdown(d)


def test_protect_flag_change_is_a_change() -> None:
    a, b = _res("fs"), _res("fs")
    b.protect = True
    ((_, changes),) = diff_plans(Plan("s", "p", [a]), Plan("s", "p", [b])).changed
    assert [(c.path, c.old, c.new) for c in changes] == [("protect", False, True)]
