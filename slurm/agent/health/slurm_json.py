"""Slurm's JSON numbers, read one way everywhere (the lifecycle controller and the job client): a plain number
(22.05's openapi v0.0.38) or data_parser's {"set", "infinite", "number"} wrapper (24.x and 25.11's v0.0.41-44,
src/plugins/data_parser/v0.0.44/parsers.c). Standard library only: the lifecycle controller runs on bare python3."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def number(value: Any) -> int | None:
    """A plain number, or the ``{"set", "infinite", "number"}`` wrapper; unset and infinite give None."""
    if isinstance(value, Mapping):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return None
    return int(value)
