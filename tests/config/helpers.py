"""Raw stack configs to mutate in tests."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from components.config import FULL_KEY
from components.stackfile import stack_file


def raw_config(stack: str) -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(stack_file(stack).read_text())["config"][FULL_KEY])
