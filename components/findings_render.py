"""How findings (components/findings.py) read, the same for every command: text for people on a terminal,
markdown for a pull request or a CI step summary, JSON for tools. Each keeps the findings' order (the rules'
order, which follows the config file or the plan); none drops a field.

Text, one block per finding (the value and fix lines only where there is one):

    <severity>[<rule>] <path or resource>
        <message>
        value: <value as written>
        fix: <fix>

JSON: `{"findings": [{"fix", "message", "path", "resource", "rule", "severity", "urn", "value"}, ...],
"counts": {"error": n, "warning": n, "info": n}}` plus what the command adds (its summary), keys sorted; an
unset text field is "", no value is null.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from components.findings import SEVERITIES, Finding

FIELDS = ("rule", "severity", "message", "fix", "path", "resource", "urn", "value")


def render_block(f: Finding) -> str:
    lines = [f"{f.severity}[{f.rule}]" + (f" {f.where}" if f.where else ""), f"    {f.message}"]
    if f.value is not None:
        lines.append(f"    value: {f.value!r}")
    if f.fix:
        lines.append(f"    fix: {f.fix}")
    return "\n".join(lines)


def render_text(findings: Iterable[Finding]) -> str:
    """One block per finding, each ending in a newline; "" for none."""
    return "".join(render_block(f) + "\n" for f in findings)


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell: `|` escaped, line breaks as <br>."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def render_markdown(findings: Iterable[Finding]) -> str:
    """A table, one row per finding (a value column only where some finding has a value); "" for none."""
    found = list(findings)
    if not found:
        return ""
    with_value = any(f.value is not None for f in found)
    head = ["severity", "rule", "where", *(["value"] if with_value else []), "message", "fix"]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for f in found:
        cells = [f.severity, f.rule, f.where, *([_value(f.value)] if with_value else []), f.message, f.fix]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows) + "\n"


def _value(value: Any) -> str:
    return "" if value is None else repr(value)


def as_dict(f: Finding) -> dict[str, Any]:
    return {name: getattr(f, name) for name in FIELDS}


def from_dict(data: dict[str, Any]) -> Finding:
    return Finding(**{name: data[name] for name in FIELDS if name in data})


def render_json(findings: Iterable[Finding], **summary: Any) -> str:
    """`{"findings": [...], **summary}`, keys sorted, indented; values JSON cannot carry are written as text."""
    found = list(findings)
    document = {**summary, "findings": [as_dict(f) for f in found],
                "counts": {s: sum(f.severity == s for f in found) for s in SEVERITIES}}
    return json.dumps(document, indent=2, sort_keys=True, default=str) + "\n"


def parse_json(text: str) -> list[Finding]:
    """The findings of a `render_json` document."""
    return [from_dict(item) for item in json.loads(text)["findings"]]
