"""The operator's config-text builder: `key=value` lines and raw lines joined by newlines.

Port of slurm-operator v1.2.1 internal/utils/config/config.go (configBuilder, NewProperty, NewPropertyRaw,
WithSeparator, WithFinalNewline, Build). Values are rendered as Go's `%v` renders the ints and strings the
builders pass.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Property:
    """One line: `key<sep>value`, or `value` alone when `raw` (config.go configProperty)."""

    key: str
    value: object
    raw: bool = False


def prop(key: str, value: object) -> Property:
    """slurm-operator v1.2.1 internal/utils/config/config.go NewProperty."""
    return Property(key, value)


def raw(value: object) -> Property:
    """slurm-operator v1.2.1 internal/utils/config/config.go NewPropertyRaw."""
    return Property("", value, raw=True)


def go_value(value: object) -> str:
    """How Go's `%v` prints the values the builders pass (strings, ints, bools)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def build_config(props: Iterable[Property], *, sep: str = "=", final_newline: bool = True) -> str:
    """slurm-operator v1.2.1 internal/utils/config/config.go configBuilder.Build.

    Each property is one element joined by "\\n" (a raw value with newlines inside stays as it is); with
    `final_newline` (the default, DefaultNewline) an empty element is appended, so the text ends with "\\n".
    """
    lines = [go_value(p.value) if p.raw else f"{p.key}{sep}{go_value(p.value)}" for p in props]
    if final_newline:
        lines.append("")
    return "\n".join(lines)
