"""Field paths written the way the API server prints them, and the error type that carries one."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldError:
    path: str  # e.g. "spec.template.spec.requirements[0].values"; "" is the document itself
    message: str


def field(parent: str, name: str) -> str:
    """A declared field: `spec` + `replicas` -> `spec.replicas`."""
    return f"{parent}.{name}" if parent else name


def entry(parent: str, key: int | str) -> str:
    """A list index or a map key: `labels` + `app` -> `labels[app]`."""
    return f"{parent}[{key}]"


def path_of(parts: Iterable[int | str], start: str = "") -> str:
    """The path `start` + a sequence of keys and indexes (jsonschema's `absolute_path`)."""
    path = start
    for part in parts:
        path = entry(path, part) if isinstance(part, int) else field(path, part)
    return path


def shown(value: Any, limit: int = 80) -> str:
    """A value as JSON, cut short so one message stays one line."""
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."
