"""Compare two offline plans resource by resource, down to the changed properties."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from scripts.offline.plan_model import Plan, PlannedResource, parse_json_text

_MISSING = object()


@dataclass
class PropertyChange:
    path: str
    old: Any
    new: Any


@dataclass
class PlanDiff:
    added: list[PlannedResource] = field(default_factory=list)
    removed: list[PlannedResource] = field(default_factory=list)
    changed: list[tuple[PlannedResource, list[PropertyChange]]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def diff_plans(old: Plan, new: Plan) -> PlanDiff:
    before, after = old.by_urn(), new.by_urn()
    result = PlanDiff(
        added=[after[u] for u in sorted(after.keys() - before.keys())],
        removed=[before[u] for u in sorted(before.keys() - after.keys())],
    )
    for urn in sorted(before.keys() & after.keys()):
        changes = diff_values(_comparable(before[urn]), _comparable(after[urn]))
        if changes:
            result.changed.append((after[urn], changes))
    return result


def across_stacks(plan: Plan) -> Plan:
    """`plan` with what names its stack replaced by placeholders: the stack in every URN (`urn:pulumi:<stack>::`),
    the cluster's name (its `clusterName` output, in resource names, tags and manifests) by `<cluster>`; two stacks'
    plans then pair resource by resource, and what remains is what the two configs make differ."""
    text = plan.to_json().replace(f"urn:pulumi:{plan.stack}::", "urn:pulumi:<stack>::")
    cluster = plan.outputs.get("clusterName")
    if isinstance(cluster, str) and cluster:
        text = text.replace(cluster, "<cluster>")
    return Plan.from_json(text)


def diff_json(d: PlanDiff, replaced: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """`diff --format json` (docs/cli-json.md): each resource as urn, type and name; a change with its properties,
    and `replace` with the inputs that make Pulumi replace it (empty: an update)."""
    def resource(r: PlannedResource) -> dict[str, Any]:
        return {"urn": r.urn, "type": r.type, "name": r.name}

    marks = replaced or {}
    return {"format": 1, "empty": d.empty,
            "added": [resource(r) for r in d.added], "removed": [resource(r) for r in d.removed],
            "changed": [{**resource(r), "replace": marks.get(r.urn, []),
                         "properties": [{"path": c.path, "old": c.old, "new": c.new} for c in changes]}
                        for r, changes in d.changed]}


def _comparable(r: PlannedResource) -> dict[str, Any]:
    """What a reviewer cares about: inputs, and the options that change how Pulumi treats a resource."""
    return {"inputs": r.inputs, "protect": r.protect, "retainOnDelete": r.retain_on_delete,
            "provider": r.provider, "parent": r.parent}


def diff_values(old: Any, new: Any, path: str = "") -> list[PropertyChange]:
    if isinstance(old, str) and isinstance(new, str):
        # JSON in a string on both sides (a ConfigMap's document): compared inside, so one changed setting is
        # one line at its path, not two whole documents.
        old_doc, new_doc = parse_json_text(old), parse_json_text(new)
        if not isinstance(old_doc, str) and not isinstance(new_doc, str):
            return diff_values(old_doc, new_doc, path)
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[PropertyChange] = []
        for key in sorted(old.keys() | new.keys(), key=str):
            sub = f"{path}.{key}" if path else str(key)
            out += diff_values(old.get(key, _MISSING), new.get(key, _MISSING), sub)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [c for i, (a, b) in enumerate(zip(old, new, strict=True)) for c in diff_values(a, b, f"{path}[{i}]")]
    if old == new and type(old) is type(new):  # 1 == True == 1.0 in Python; not in a plan
        return []
    return [PropertyChange(path, None if old is _MISSING else old, None if new is _MISSING else new)]


def _short(r: PlannedResource) -> str:
    return f"{r.type} {r.name}"


def _value(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 120 else text[:117] + "..."


def _sign(r: PlannedResource, replaced: dict[str, list[str]]) -> str:
    """`~` an update; `+-` a replacement (Pulumi's sign), with the inputs that force it."""
    return f"+- {_short(r)} (replace: {', '.join(replaced[r.urn])})" if r.urn in replaced else f"~ {_short(r)}"


def render_text(d: PlanDiff, replaced: dict[str, list[str]] | None = None) -> str:
    if d.empty:
        return "No changes.\n"
    marks = replaced or {}
    replacing = f" ({len(marks)} by replacement)" if marks else ""
    lines = [f"{len(d.added)} to add, {len(d.changed)} to change{replacing}, {len(d.removed)} to remove"]
    lines += [f"+ {_short(r)}" for r in d.added]
    lines += [f"- {_short(r)}" for r in d.removed]
    for r, changes in d.changed:
        lines.append(_sign(r, marks))
        lines += [f"    {c.path}: {_value(c.old)} -> {_value(c.new)}" for c in changes]
    return "\n".join(lines) + "\n"


def render_markdown(d: PlanDiff, title: str = "Offline plan diff", replaced: dict[str, list[str]] | None = None
                    ) -> str:
    if d.empty:
        return f"### {title}\n\nNo changes.\n"
    marks = replaced or {}
    lines = [f"### {title}", "",
             f"**{len(d.added)}** to add, **{len(d.changed)}** to change"
             + (f" (**{len(marks)}** by replacement)" if marks else "") + f", **{len(d.removed)}** to remove", "",
             "| | type | name |", "| --- | --- | --- |"]
    lines += [f"| + | `{_cell(r.type)}` | `{_cell(r.name)}` |" for r in d.added]
    lines += [f"| - | `{_cell(r.type)}` | `{_cell(r.name)}` |" for r in d.removed]
    lines += [f"| +- | `{_cell(r.type)}` | `{_cell(r.name)}` (replace: {_cell(', '.join(marks[r.urn]))}) |"
              if r.urn in marks else f"| ~ | `{_cell(r.type)}` | `{_cell(r.name)}` |" for r, _ in d.changed]
    for r, changes in d.changed:
        summary = html.escape(f"{r.type} {r.name}")
        count = f"{len(changes)} propert{'y' if len(changes) == 1 else 'ies'}"
        lines += ["", f"<details><summary><code>{summary}</code>: {count}</summary>",
                  "", "| property | old | new |", "| --- | --- | --- |"]
        lines += [f"| `{_cell(c.path)}` | `{_cell(_value(c.old))}` | `{_cell(_value(c.new))}` |" for c in changes]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """Text for a code span in a table cell: a `|` would end the cell, a backtick the span."""
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")
