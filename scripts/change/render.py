"""A change set in words: per change, its key, old and new value, policy, what it does and loses, and the fix;
text for the terminal, markdown for a PR comment, JSON for tools (docs/cli-json.md)."""

from __future__ import annotations

import html
from typing import Any

from scripts.change.compare import Change

_SIGN = {"add": "+", "remove": "-", "change": "~"}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def _values(change: Change) -> str:
    if change.action == "change":
        return f"{_short(change.old)} -> {_short(change.new)}"
    return "added" if change.action == "add" else "removed"


def verdict(change: Change) -> str:
    if change.forced:
        return "FORCED (named in --force)"
    return f"REFUSED: name it in `--force {change.name}` to do it anyway" if change.refused else "allowed"


def render_text(changes: list[Change], source: str) -> str:
    if not changes:
        return f"Stack config: no change against the deployed one ({source}).\n"
    refused = sum(c.refused for c in changes)
    lines = [f"Stack config against the deployed one ({source}): {len(changes)} change(s), {refused} refused"]
    for c in changes:
        policy = c.policy
        lines += [f"{_SIGN[c.action]} {c.name}: {_values(c)}",
                  f"    policy: {policy.kind.label} ({policy.kind.effect})" + (f": {policy.does}" if policy.does
                                                                             else ""),
                  f"    loses: {policy.kind.loses}"]
        if c.problem:
            lines.append(f"    problem: {c.problem}")
        if c.refused or c.forced:
            if policy.fix:
                lines.append(f"    fix: {policy.fix}")
            lines.append(f"    {verdict(c)}")
    return "\n".join(lines) + "\n"


def render_markdown(changes: list[Change], source: str) -> str:
    if not changes:
        return f"### Stack config\n\nNo change against the deployed one ({html.escape(source)}).\n"
    lines = ["### Stack config against the deployed one", "", f"From {html.escape(source)}.", "",
             "| | key | change | policy | does | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for c in changes:
        does = " ".join(filter(None, [c.policy.does, c.problem, f"Fix: {c.policy.fix}" if c.refused and c.policy.fix
                                      else ""]))
        lines.append(f"| {_SIGN[c.action]} | `{_cell(c.name)}` | `{_cell(_values(c))}` | {_cell(c.policy.kind.label)} "
                     f"| {_cell(does)} | {_cell(verdict(c))} |")
    return "\n".join(lines) + "\n"


def changes_json(changes: list[Change], source: str) -> dict[str, Any]:
    return {"deployed": source, "refused": sum(c.refused for c in changes), "changes": [
        {"key": c.name, "action": c.action, "old": c.old, "new": c.new, "policy": c.policy.kind.name.lower(),
         "label": c.policy.kind.label, "effect": c.policy.kind.effect, "does": c.policy.does,
         "loses": c.policy.kind.loses, "problem": c.problem, "fix": c.policy.fix, "refused": c.refused,
         "forced": c.forced} for c in changes]}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")
