"""A small IAM policy evaluator: AWS's evaluation logic for what this project's policies use, saying why a
request is denied.

From docs.aws.amazon.com/IAM/latest/UserGuide (reference_policies_evaluation-logic.html,
reference_policies_elements_condition_operators.html, reference_policies_condition-single-vs-multi-valued-
context-keys.html):
- an explicit Deny wins; otherwise some Allow must match; nothing matching is an implicit deny;
- Action/NotAction match case-insensitively, Resource/NotResource (and ArnLike/ArnEquals) ARN segment by
  segment, all with the wildcards `*` and `?`; `*` alone matches anything;
- every operator and every key of a Condition must hold; the values listed for one key are alternatives;
- a key missing from the request makes its condition false, except: `...IfExists` (true), `Null` (it tests
  presence), the negated operators (true), and `ForAllValues:` (true on a missing or empty set);
- condition key names are case-insensitive; values are case-sensitive, except for Bool.
Operators beyond the string, ARN, Bool and Null families raise UnsupportedPolicy rather than guess.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

Value = str | tuple[str, ...]  # a multivalued key (aws:TagKeys) is a tuple
ARN_PARTS = 6  # arn:partition:service:region:account:resource (the resource may hold more colons)
NEGATED = ("StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike")


class UnsupportedPolicy(ValueError):
    """A policy element this evaluator does not model."""


@dataclass(frozen=True)
class Request:
    action: str
    resource: str
    context: Mapping[str, Value] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    why: str  # the statement that allowed or denied it; for an implicit deny, what the nearest ones lack


@lru_cache(maxsize=4096)
def _pattern(glob: str, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in glob)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def glob_match(glob: str, value: str, ignore_case: bool = False) -> bool:
    return _pattern(glob, ignore_case).fullmatch(value) is not None


def action_match(pattern: str, action: str) -> bool:
    return glob_match(pattern, action, ignore_case=True)


def arn_match(pattern: str, arn: str) -> bool:
    if pattern == "*":
        return True
    wanted, actual = pattern.split(":", ARN_PARTS - 1), arn.split(":", ARN_PARTS - 1)
    if len(wanted) != ARN_PARTS or len(actual) != ARN_PARTS:
        return pattern == arn  # not an ARN (IAM rejects such a Resource): no wildcard applies
    return all(glob_match(w, a) for w, a in zip(wanted, actual, strict=True))


def _strings(value: Any) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    return tuple(str(v).lower() if isinstance(v, bool) else str(v) for v in values)


def _matches(operator: str, wanted: str, actual: str) -> bool:
    if operator in ("StringEquals", "StringNotEquals"):
        return wanted == actual
    if operator in ("StringLike", "StringNotLike"):
        return glob_match(wanted, actual)
    if operator in ("ArnEquals", "ArnLike", "ArnNotEquals", "ArnNotLike"):
        return arn_match(wanted, actual)
    if operator == "Bool":
        return wanted.lower() == actual.lower()
    raise UnsupportedPolicy(f"condition operator {operator}")


def _one(operator: str, wanted: tuple[str, ...], actual: str) -> bool:
    """One request value against a key's policy values (alternatives); a negated operator matches none."""
    hit = any(_matches(operator, w, actual) for w in wanted)
    return not hit if operator in NEGATED else hit


def _condition(full_operator: str, key: str, wanted: tuple[str, ...], context: Mapping[str, Value]) -> str | None:
    """None when the condition holds, else why not."""
    qualifier, _, operator = full_operator.rpartition(":")
    if_exists = operator.endswith("IfExists")
    operator = operator.removesuffix("IfExists")
    lowered = {k.lower(): v for k, v in context.items()}
    present = key.lower() in lowered and lowered[key.lower()] != ()
    actual = lowered.get(key.lower())
    label = f"{full_operator} {key} {list(wanted)}"
    if operator == "Null":  # "true": the key must be absent; "false": present
        holds = any((w.lower() == "true") != present for w in wanted)
        return None if holds else f"{label}: the request {'carries' if present else 'does not carry'} {key}"
    if not present:
        if if_exists or qualifier == "ForAllValues" or (operator in NEGATED and not qualifier):
            return None
        return f"{label}: the request does not carry {key}"
    values = actual if isinstance(actual, tuple) else (actual,)
    if qualifier == "ForAllValues":
        failing = [v for v in values if not _one(operator, wanted, v)]
        return f"{label}: the request's {failing} do not match" if failing else None
    if qualifier == "ForAnyValue":
        return None if any(_one(operator, wanted, v) for v in values) else f"{label}: none of {list(values)} match"
    if qualifier:
        raise UnsupportedPolicy(f"condition qualifier {qualifier}")
    if isinstance(actual, tuple):
        raise UnsupportedPolicy(f"{key} has several values: {full_operator} needs ForAllValues or ForAnyValue")
    return None if _one(operator, wanted, actual) else f"{label}: the request has {actual!r}"


def failed_conditions(statement: Mapping[str, Any], context: Mapping[str, Value]) -> list[str]:
    return [why for operator, keys in (statement.get("Condition") or {}).items() for key, wanted in keys.items()
            if (why := _condition(operator, key, _strings(wanted), context)) is not None]


def _covers(statement: Mapping[str, Any], element: str, match: Any, value: str) -> bool:
    if element in statement:
        return any(match(p, value) for p in _strings(statement[element]))
    negated = f"Not{element}"
    if negated in statement:
        return not any(match(p, value) for p in _strings(statement[negated]))
    raise UnsupportedPolicy(f"a statement without {element} or {negated}")


def statements(policies: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each statement with a label: `<policy>/<Sid>` or `<policy>/statement <n>`."""
    found = []
    for name, document in policies:
        listed = document.get("Statement", [])
        for n, statement in enumerate(listed if isinstance(listed, list) else [listed], 1):
            found.append((f"{name}/{statement.get('Sid') or f'statement {n}'}", statement))
    return found


def evaluate(policies: Sequence[tuple[str, Mapping[str, Any]]], request: Request) -> Decision:
    """The decision of identity policies `(name, document)` on `request`."""
    allowed_by, near_misses, other_resources = None, [], []
    for label, statement in statements(policies):
        if not _covers(statement, "Action", action_match, request.action):
            continue
        if not _covers(statement, "Resource", arn_match, request.resource):
            other_resources.append(f"{label} grants it on {list(_strings(statement.get('Resource', [])))}")
            continue
        failed = failed_conditions(statement, request.context)
        if statement["Effect"] == "Deny" and not failed:
            return Decision(False, f"explicitly denied by {label}")
        if statement["Effect"] == "Allow":
            if not failed:
                allowed_by = allowed_by or label
            else:
                near_misses.append(f"{label} needs {'; '.join(failed)}")
    if allowed_by:
        return Decision(True, f"allowed by {allowed_by}")
    if near_misses:
        return Decision(False, " / ".join(near_misses))
    if other_resources:
        return Decision(False, f"no statement allows it on this resource ({'; '.join(other_resources)})")
    return Decision(False, "no statement allows the action")
