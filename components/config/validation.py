"""Turn a raw `slurm-eks:cluster` value into a `ClusterConfig`, or a `ConfigError` listing every problem.

Two passes, like AWS ParallelCluster: the structure (types, unknown keys with a "did you mean" hint) from
the pydantic models, then the named semantic rules in `components.config.rules` (a module per domain). The
rules also run when the only structural errors are unknown keys, so both kinds are reported together.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from components.config.cluster import FULL_KEY, ClusterConfig
from components.config.problems import ConfigError
from components.config.rules import run_validators
from components.config.stack_context import NO_STACK, StackContext
from components.findings import Finding

_PLAIN_KEY = re.compile(r"[^.\[\]\s\"]+")


def parse_cluster_config(raw: Any, source: str = "", stack: StackContext = NO_STACK,
                         ) -> tuple[ClusterConfig, list[Finding]]:
    """Validate `raw`; return the config and its warnings, or raise ConfigError naming every error. `stack`: the
    stack it is, for the rules that read beyond the config (its siblings' storage, its advisory waivers)."""
    if not isinstance(raw, dict):
        raise ConfigError(
            [Finding(rule="config-shape", severity="error", value=raw, message=f"`{FULL_KEY}` must be a mapping of "
                     "settings", fix="see the config reference in docs/config.md")],
            source,
        )
    try:
        config = ClusterConfig.model_validate(raw)
    except ValidationError as exc:
        structural = [_structural_problem(e) for e in exc.errors()]
        # Unknown keys alone leave a readable config: check its rules too, so one typo does not hide the rest.
        readable = _without_unknown_keys(raw, exc.errors())
        raise ConfigError(structural + (run_validators(readable, stack) if readable else []), source) from None
    problems = run_validators(config, stack)
    if any(p.severity == "error" for p in problems):
        raise ConfigError(problems, source)
    return config, problems


def _without_unknown_keys(raw: dict[str, Any], errors: list[Any]) -> ClusterConfig | None:
    """The config with the unknown keys dropped, or None when other structural errors remain."""
    if any(e["type"] != "extra_forbidden" for e in errors):
        return None
    trimmed = copy.deepcopy(raw)
    for error in errors:
        *parents, key = error["loc"]
        container: Any = trimmed
        for part in parents:
            container = container[part]
        del container[key]
    try:
        return ClusterConfig.model_validate(trimmed)
    except ValidationError:
        return None


def config_path(loc: tuple[Any, ...]) -> str:
    """("partitions", "gpu", "instanceTypes", 0) -> "partitions.gpu.instanceTypes[0]"; a key that is empty or
    holds a dot, bracket or space is quoted, so every path names one place: `tags["a.b"]`, `[""]`."""
    out = ""
    if loc and loc[-1] == "[key]":  # pydantic's marker for an error in a mapping's key: the path is the key
        loc = loc[:-1]
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(str(part)):
            out += f"[{json.dumps(str(part))}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _structural_problem(error: Any) -> Finding:
    loc = tuple(error["loc"])
    path = config_path(loc)
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        known = _keys_at(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`?" if close else f"known keys here: {', '.join(sorted(known))}"
        return Finding(rule="unknown-key", severity="error", path=path, value=value, message=f"unknown key `{loc[-1]}`",
                       fix=hint)
    if kind == "missing":
        return Finding(rule="required", severity="error", path=path, message="required setting is missing",
                       fix=f"add `{path}`")
    if kind == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        return Finding(rule="type-string-type", severity="error", path=path, value=value,
                       message="a number where text is expected",
                       fix=f'quote it as a string, e.g. "{value}" (YAML reads an unquoted 1.30 as the number 1.3)')
    message = error["msg"].removeprefix("Value error, ")
    fix = {
        "literal_error": f"use one of: {error.get('ctx', {}).get('expected', '')}",
        "greater_than_equal": f"use a value >= {error.get('ctx', {}).get('ge')}",
        "greater_than": f"use a value > {error.get('ctx', {}).get('gt')}",
        "too_short": "add at least one entry",
    }.get(kind, "correct the value as the message says")
    return Finding(rule=f"type-{kind.replace('_', '-')}", severity="error", path=path, value=value, message=message,
                   fix=fix)


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys a model accepts at `loc` (aliases as written in YAML), walking models, lists and maps."""
    model: Any = ClusterConfig
    for part in loc:
        model = _step_into(model, part)
        if model is None:
            return []
    if isinstance(model, type) and issubclass(model, BaseModel):
        return [f.alias or name for name, f in model.model_fields.items()]
    return []


def _step_into(annotation: Any, part: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, field in annotation.model_fields.items():
            if part in (name, field.alias):
                return _unwrap(field.annotation)
        return None
    origin = typing.get_origin(annotation)
    if origin in (list, dict):
        return _unwrap(typing.get_args(annotation)[-1])
    return None


def _unwrap(annotation: Any) -> Any:
    """Optional[X] -> X (the configs never mix models with other types in one union)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return args[0] if args else annotation
    return annotation
