"""Raw stack configs to mutate in tests."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from components.config import FULL_KEY
from components.problems import ConfigError, Problem
from components.stackfile import stack_file
from components.validation import parse_cluster_config


def raw_config(stack: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(stack_file(stack).read_text())["config"][FULL_KEY])


def problems_of_rule(raw: dict[str, Any], rule: str) -> list[Problem]:
    """The problems `rule` reports for `raw`, whether parsing stopped (ConfigError) or went on."""
    try:
        _, problems = parse_cluster_config(raw, "test.yaml")
    except ConfigError as exc:
        problems = exc.problems
    return [p for p in problems if p.rule == rule]
