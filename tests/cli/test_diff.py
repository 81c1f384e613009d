"""Plan diff semantics: added, removed, changed, property paths."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from scripts.cli.main import app
from scripts.offline.diff import across_stacks, diff_plans, diff_values, render_markdown, render_text
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


def test_options_that_change_how_pulumi_treats_a_resource_are_changes() -> None:
    a, b = _res("fs"), _res("fs")
    b.retain_on_delete, b.parent = True, "urn:pulumi:s::p::c::other"
    b.provider = "urn:pulumi:s::p::pulumi:providers:aws::eu"
    ((_, changes),) = diff_plans(Plan("s", "p", [a]), Plan("s", "p", [b])).changed
    assert [c.path for c in changes] == ["parent", "provider", "retainOnDelete"]


def test_values_of_another_type_differ_even_where_python_says_equal() -> None:
    # `1 == True` and `1 == 1.0` in Python; in a plan (and to the provider) they are different values.
    assert [(c.old, c.new) for c in diff_values({"a": 1, "b": 0, "c": 1}, {"a": True, "b": False, "c": 1.0})] == [
        (1, True), (0, False), (1, 1.0)]
    assert diff_values({"a": 1, "b": [True]}, {"a": 1, "b": [True]}) == []


def test_markdown_cells_escape_pipes_and_backticks() -> None:
    old = Plan("s", "p", [_res("r|1", rule="a|b")])
    new = Plan("s", "p", [_res("r|1", rule="c`d")])
    text = render_markdown(diff_plans(old, new))
    assert "| ~ | `aws:x/y:Y` | `r\\|1` |" in text
    assert "| `inputs.rule` | `'a\\|b'` | `'c'd'` |" in text
    assert "<code>aws:x/y:Y r|1</code>: 1 property</summary>" in text
    # Every table row has exactly as many unescaped cell separators as its header.
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert {len(re.findall(r"(?<!\\)\|", row)) for row in rows} == {4}


def test_a_diff_with_only_additions_or_only_removals_is_not_empty() -> None:
    assert not diff_plans(Plan("s", "p", []), Plan("s", "p", [_res("new")])).empty
    assert not diff_plans(Plan("s", "p", [_res("gone")]), Plan("s", "p", [])).empty
    assert diff_plans(Plan("s", "p", [_res("same", a=1)]), Plan("s", "p", [_res("same", a=1)])).empty


def test_shapes_that_change_are_one_change_at_their_path() -> None:
    assert [(c.path, c.old, c.new) for c in diff_values({"a": {"b": 1}}, {"a": 5})] == [("a", {"b": 1}, 5)]
    assert [(c.path, c.old, c.new) for c in diff_values({}, {"a": {"b": 1}})] == [("a", None, {"b": 1})]
    assert [(c.path, c.old, c.new) for c in diff_values({"l": [1, 2]}, {"l": [1]})] == [("l", [1, 2], [1])]


def test_long_values_are_cut_at_120_characters() -> None:
    old, new = Plan("s", "p", [_res("r", v="x" * 200)]), Plan("s", "p", [_res("r", v="y" * 118)])
    (line,) = [line for line in render_text(diff_plans(old, new)).splitlines() if "inputs.v" in line]
    before, after = line.strip().removeprefix("inputs.v: ").split(" -> ")
    assert before == repr("x" * 200)[:117] + "..." and len(before) == 120
    assert after == repr("y" * 118) and len(after) == 120  # exactly 120: kept whole
    one_over = render_text(diff_plans(Plan("s", "p", [_res("r", v="a")]), Plan("s", "p", [_res("r", v="z" * 119)])))
    assert repr("z" * 117)[:117] + "..." in one_over  # 121 characters: cut


def test_text_and_markdown_show_every_changed_property() -> None:
    d = diff_plans(Plan("s", "p", [_res("r", a=1, b=2)]), Plan("s", "p", [_res("r", a=3, b=4)]))
    assert render_text(d).splitlines()[1:] == ["~ aws:x/y:Y r", "    inputs.a: 1 -> 3", "    inputs.b: 2 -> 4"]
    markdown = render_markdown(d)
    assert "<code>aws:x/y:Y r</code>: 2 properties</summary>" in markdown
    assert "| `inputs.a` | `1` | `3` |" in markdown and "| `inputs.b` | `2` | `4` |" in markdown


def test_json_in_strings_is_compared_inside() -> None:
    # A ConfigMap holding a JSON document: one changed setting is one change at its path inside.
    old = {"data": {"doc.json": '{"qos": {"b": {"GrpTRES": "gres/gpu=64", "Priority": 1}}}'}}
    new = {"data": {"doc.json": '{\n  "qos": {"b": {"GrpTRES": "gres/gpu=32", "Priority": 1}}\n}'}}
    assert [(c.path, c.old, c.new) for c in diff_values(old, new)] == [
        ("data.doc.json.qos.b.GrpTRES", "gres/gpu=64", "gres/gpu=32")]
    # The same document written differently is no change.
    assert diff_values({"d": '{"a": [1, 2]}'}, {"d": '{\n "a": [1,2]\n}'}) == []


def test_json_on_one_side_only_is_a_change_of_the_whole_string() -> None:
    for old, new in (('{"a": 1}', "plain"), ("plain", '{"a": 1}'), ('{"a": 1', '{"a": 2')):
        assert [(c.path, c.old, c.new) for c in diff_values({"v": old}, {"v": new})] == [("v", old, new)]
    rendered = render_text(diff_plans(Plan("s", "p", [_res("r", v='{"k": "x"}')]),
                                      Plan("s", "p", [_res("r", v='{"k": "y"}')])))
    assert rendered.splitlines()[1:] == ["~ aws:x/y:Y r", "    inputs.v.k: 'x' -> 'y'"]


def test_two_stacks_plans_are_compared_resource_by_resource_across_stacks(tmp_path: Path) -> None:
    """dev against prod: without --across-stacks every URN differs (the stack is in it), so it is refused with the
    option to give; with it, resources pair up and only what the configs make differ is listed."""
    from scripts.offline.plan import write_plan
    from tests.plan.fixtures import shipped_plan

    dev, prod = shipped_plan("dev"), shipped_plan("prod")
    write_plan(dev, tmp_path / "dev")
    write_plan(prod, tmp_path / "prod")
    refused = CliRunner().invoke(app, ["diff", str(tmp_path / "dev"), str(tmp_path / "prod")])
    assert refused.exit_code == 2 and "give --across-stacks" in refused.output
    result = CliRunner().invoke(app, ["diff", str(tmp_path / "dev"), str(tmp_path / "prod"), "--across-stacks"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    both = across_stacks(dev).by_urn().keys() & across_stacks(prod).by_urn().keys()
    assert len(both) > 100  # most of the cluster is the same resources in both stacks
    added = [line for line in result.output.splitlines() if line.startswith("+ ")]
    assert "+ aws:rds/instance:Instance slurm-db-mariadb" in added  # prod's RDS accounting; dev's is in-cluster
    assert len(added) == len(prod.resources) - len(both)
