"""Raw stack configs to mutate in tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import yaml

from components.config.cluster import FULL_KEY
from components.config.problems import ConfigError
from components.config.stackfile import stack_file
from components.config.storage_prefixes import S3, moved
from components.config.validation import parse_cluster_config
from components.findings import Finding


def raw_config(stack: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(stack_file(stack).read_text())["config"][FULL_KEY])


def own_storage(raw: Any, source: str, name: str) -> Any:
    """`raw` (a config of stack `source`) with every S3 location moved to a prefix of stack `name`'s own, as
    `slurm-eks init --from` does: stacks written beside each other must not share one (storage-prefixes-shared)."""
    if isinstance(raw, dict):
        return {k: own_storage(v, source, name) for k, v in raw.items()}
    if isinstance(raw, list):
        return [own_storage(v, source, name) for v in raw]
    return moved(raw, source, name) if isinstance(raw, str) and raw.startswith(S3) else raw


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
