"""The stack config as a tree of keys: every key the model defines (a pattern, `*` for a name in a map, `[]` for
an item of a list), and one config's values at its concrete keys. Update policies (components/config/
update_policy.py) are looked up by pattern; a change between two configs is found by concrete key."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

Segment = str | int  # a key, or an item's index in a list
Key = tuple[Segment, ...]
NodeKind = Literal["leaf", "member"]
ANY_NAME, ANY_ITEM = "*", "[]"


@dataclass(frozen=True)
class Node:
    """A key the model defines: a `leaf` holds a value (a scalar, or a list or map of scalars, compared whole); a
    `member` is an entry that comes and goes: a name of a map of models, an item of a list of models, or a
    section that may be left out."""

    pattern: Key
    kind: NodeKind


def text(key: Key) -> str:
    """("partitions", "gpu", "maxNodes") -> "partitions.gpu.maxNodes"; an index -> "[0]"."""
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else ("" if part == ANY_ITEM else "." if out else "") + (
            "[]" if part == ANY_ITEM else part)
    return out


def parse(path: str) -> Key:
    """The inverse of `text`, for keys people type (`--force partitions.gpu`)."""
    out: list[Segment] = []
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("["):
            inner = part.strip("[]")
            out.append(ANY_ITEM if inner == "" else int(inner))
        else:
            out.append(part)
    return tuple(out)


def nodes(model: type[BaseModel]) -> list[Node]:
    """Every key of `model`, leaves and members, in the model's order."""
    return list(_fields(model, ()))


def _fields(model: type[BaseModel], prefix: Key) -> Iterator[Node]:
    for name, field in model.model_fields.items():
        yield from _annotation(field.annotation, (*prefix, field.alias or name))


def _annotation(annotation: Any, key: Key) -> Iterator[Node]:
    inner, optional = _model_of(annotation)
    if inner is not None:
        if optional:
            yield Node(key, "member")
        yield from _fields(inner, key)
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict and _model_of(args[1])[0] is not None:
        yield Node((*key, ANY_NAME), "member")
        yield from _annotation(args[1], (*key, ANY_NAME))
    elif origin is list and args and _model_of(args[0])[0] is not None:
        yield Node((*key, ANY_ITEM), "member")
        yield from _annotation(args[0], (*key, ANY_ITEM))
    else:
        yield Node(key, "leaf")


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model an annotation holds, and whether it may be None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        if models:
            return models[0], type(None) in typing.get_args(annotation)
    return None, False


def matches(pattern: Key, key: Key) -> bool:
    return len(pattern) == len(key) and all(
        p == k or (p == ANY_NAME and isinstance(k, str)) or (p == ANY_ITEM and isinstance(k, int))
        for p, k in zip(pattern, key, strict=True))


def values(model: type[BaseModel], data: dict[str, Any]) -> dict[Key, tuple[NodeKind, Any]]:
    """A config's keys (`model_dump(by_alias=True, mode="json")` of `model`), each concrete: a leaf with its value,
    or a member (present) with its whole entry."""
    return {key: (kind, value) for key, kind, value in _walk_model(model, data, ())}


def _walk_model(model: type[BaseModel], data: dict[str, Any], prefix: Key) -> Iterator[tuple[Key, NodeKind, Any]]:
    for name, field in model.model_fields.items():
        alias = field.alias or name
        yield from _walk(field.annotation, data.get(alias), (*prefix, alias))


def _walk(annotation: Any, value: Any, key: Key) -> Iterator[tuple[Key, NodeKind, Any]]:
    inner, optional = _model_of(annotation)
    if inner is not None:
        if value is None:
            return
        if optional:
            yield key, "member", value
        yield from _walk_model(inner, value, key)
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict and _model_of(args[1])[0] is not None:
        for name, item in (value or {}).items():
            yield (*key, name), "member", item
            yield from _walk(args[1], item, (*key, name))
    elif origin is list and args and _model_of(args[0])[0] is not None:
        for index, item in enumerate(value or []):
            yield (*key, index), "member", item
            yield from _walk(args[0], item, (*key, index))
    else:
        yield key, "leaf", value
