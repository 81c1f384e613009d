"""Raw stack configs to mutate in tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import yaml

from components.config.cluster import FULL_KEY
from components.config.problems import ConfigError
from components.config.stackfile import stack_file
from components.config.validation import parse_cluster_config
from components.findings import Finding


def raw_config(stack: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(stack_file(stack).read_text())["config"][FULL_KEY])


def problems_of_rule(raw: dict[str, Any], rule: str) -> list[Finding]:
    """The problems `rule` reports for `raw`, whether parsing stopped (ConfigError) or went on."""
    try:
        _, problems = parse_cluster_config(raw, "test.yaml")
    except ConfigError as exc:
        problems = exc.findings
    return [p for p in problems if p.rule == rule]


Mutation = Callable[[dict[str, Any]], None]


def set_at(path: str, value: Any) -> Mutation:
    def mutate(c: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = c
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        node[last] = value
    return mutate


def both(*ms: Mutation) -> Mutation:
    def mutate(c: dict[str, Any]) -> None:
        for m in ms:
            m(c)
    return mutate


def drop_at(path: str) -> Mutation:
    def mutate(c: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = c
        for p in parents:
            node = node[p]
        node.pop(last)
    return mutate
