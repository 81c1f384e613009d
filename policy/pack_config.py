"""The pack's configuration for one stack: `policy/config/<stack>.json`, kept with the pack and owned by whoever
owns the pack. `pulumi preview --policy-pack policy --policy-pack-config policy/config/<stack>.json` hands it
to the rules online (`args.get_config()`, and Pulumi applies enforcement levels itself); `slurm-eks policy
--stack <stack>` reads the same file here, so the two agree.

The format and its meaning are Pulumi's (pulumi/pulumi pkg/resource/analyzer/config.go, parsePolicyPackConfig
and ReconcilePolicyPackConfig): each key is a policy name, or `all`; each value is an enforcement level, or an
object of config properties with an optional `enforcementLevel`. Schema defaults come first, then `all`, then
each policy's own entry. Pulumi validates the properties against the policy's config schema; here an unknown
policy or property is an error too, so a typo never reads as a waiver offline.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policy.model import Enforcement, Rule, Settings

CONFIG_DIR = Path(__file__).resolve().parent / "config"
ALL = "all"
# Pulumi's levels (apitype.EnforcementLevel); None: the rule does not run. Rules here only validate, and
# pulumi-policy reports a validate-only policy at level `remediate` as mandatory.
LEVELS: dict[str, Enforcement | None] = {"advisory": Enforcement.advisory, "mandatory": Enforcement.mandatory,
                                         "remediate": Enforcement.mandatory, "disabled": None}
JSON_TYPES: dict[str, type | tuple[type, ...]] = {"boolean": bool, "string": str, "array": list, "object": dict,
                                                  "integer": int, "number": (int, float)}


class PackConfigError(ValueError):
    """A pack config file that Pulumi would refuse, or that names a policy or property the pack lacks."""


@dataclass(frozen=True)
class PackConfig:
    """Each rule's enforcement level (None: disabled) and settings for one stack."""

    levels: Mapping[str, Enforcement | None]
    settings: Mapping[str, Settings]
    source: Path | None = None  # the file read; None: no file, the pack's defaults

    def level(self, rule: Rule) -> Enforcement | None:
        return self.levels[rule.name]

    def settings_of(self, rule: Rule) -> Settings:
        return self.settings[rule.name]


def config_path(stack: str) -> Path:
    return CONFIG_DIR / f"{stack}.json"


def parse(raw: Any, rules: Sequence[Rule], source: Path | None = None) -> PackConfig:
    """The reconciled config: every rule's level and settings, defaults filled in."""
    if not isinstance(raw, Mapping):
        raise PackConfigError(f"{source or 'pack config'}: not a JSON object of policy names")
    by_name = {rule.name: rule for rule in rules}
    levels = {rule.name: rule.enforcement for rule in rules}
    settings = {rule.name: {k: v["default"] for k, v in rule.config_schema.items() if "default" in v}
                for rule in rules}
    entries = {name: _entry(name, value) for name, value in raw.items()}
    if ALL in entries:
        level, properties = entries.pop(ALL)
        if properties:
            raise PackConfigError(f"{ALL}: takes an enforcement level only")
        if level is not None:
            levels = dict.fromkeys(levels, LEVELS[level])
    for name, (level, properties) in entries.items():
        if name not in by_name:
            raise PackConfigError(f"{name}: no such policy in the pack (policies: {', '.join(by_name)})")
        if level is not None:
            levels[name] = LEVELS[level]
        settings[name] |= _checked(by_name[name], properties)
    return PackConfig(levels, settings, source)


def load(path: Path, rules: Sequence[Rule]) -> PackConfig:
    text = path.read_text()
    try:
        raw = json.loads(text) if text.strip() else {}  # Pulumi accepts an empty file
    except json.JSONDecodeError as exc:
        raise PackConfigError(f"{path}: not JSON ({exc})") from None
    return parse(raw, rules, path)


def for_stack(stack: str, rules: Sequence[Rule], path: Path | None = None) -> PackConfig:
    """`path`, else policy/config/<stack>.json when it exists, else the pack's defaults."""
    if path is None:
        path = config_path(stack)
        if not path.exists():
            return parse({}, rules)
    return load(path, rules)


def _entry(name: str, value: Any) -> tuple[str | None, dict[str, Any]]:
    """(enforcement level if set, properties) of one key of the file."""
    if isinstance(value, str):
        level, properties = value, {}
    elif isinstance(value, Mapping):
        properties = dict(value)
        level = properties.pop("enforcementLevel", None)
    else:
        raise PackConfigError(f"{name}: {value!r} is not a valid value; must be a string or object")
    if level is not None and level not in LEVELS:
        raise PackConfigError(f"{name}: {level!r} is not a valid enforcement level ({', '.join(LEVELS)})")
    return level, properties


def _checked(rule: Rule, properties: dict[str, Any]) -> dict[str, Any]:
    schema = rule.config_schema
    for key, value in properties.items():
        if key not in schema:
            known = ", ".join(schema) or "none"
            raise PackConfigError(f"{rule.name}.{key}: not a config property of this policy (properties: {known})")
        expected = schema[key].get("type")
        # JSON booleans are not numbers, though Python's bool is an int.
        if expected and (not isinstance(value, JSON_TYPES[expected]) or
                         (expected != "boolean" and isinstance(value, bool))):
            raise PackConfigError(f"{rule.name}.{key}: Invalid type. Expected: {expected}, given: {value!r}")
        setting = getattr(rule, "setting", None)
        if setting is not None and setting.key == key:
            try:
                setting.parse(value, f"{rule.name}.{key}")
            except ValueError as exc:
                raise PackConfigError(str(exc)) from None
    return properties
