"""What a rule sees and what it reports, the same offline (the plan) and online (`pulumi preview`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol

from components.findings import Finding, Severity, resource_label

# A value only known after deploy. The offline plan writes this marker, and the online pack maps
# preview's unknowns to it: rules never report what they cannot see (`pulumi up` checks again, known).
UNKNOWN = "[unknown]"


class Resource(Protocol):
    """A planned resource: scripts.offline.plan_model.PlannedResource offline, pack.PreviewResource online."""

    @property
    def urn(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def inputs(self) -> Mapping[str, Any]: ...
    @property
    def dependencies(self) -> Sequence[str]: ...


class Enforcement(StrEnum):
    mandatory = "mandatory"  # blocks `pulumi preview/up`; `slurm-eks policy` exits 1
    advisory = "advisory"  # reported only


# A violation is a finding (components/findings.py) whose severity is its rule's level for the stack.
SEVERITY: Mapping[Enforcement, Severity] = MappingProxyType({Enforcement.mandatory: "error",
                                                             Enforcement.advisory: "warning"})
ENFORCEMENT: Mapping[str, Enforcement] = MappingProxyType({s: e for e, s in SEVERITY.items()})


def violation(rule: Rule, urn: str, message: str) -> Finding:
    """What `rule` found in the resource `urn`, at the rule's own level (the pack's config may change it)."""
    return Finding(rule=rule.name, severity=SEVERITY[rule.enforcement], resource=resource_label(urn), urn=urn,
                   message=message, fix=rule.fix)


ResourceCheck = Callable[[str, Mapping[str, Any]], list[str]]
"""(resource type, inputs) -> one message per problem."""
StackCheck = Callable[[Sequence[Resource]], list[tuple[str, str]]]
"""all resources -> (urn, message) per problem, for rules that relate resources to each other."""
Settings = Mapping[str, Any]
"""A rule's properties from the pack's config (policy/pack_config.py): pulumi-policy's `args.get_config()`."""
NO_SETTINGS: Settings = MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class Waiver:
    """An exception to a rule for some resources of one stack. The pack's owners grant it in that stack's pack
    config (policy/config/<stack>.json), never the stack being checked: a boolean property of the rule's
    pulumi-policy config schema, false unless set."""

    key: str
    description: str
    covers: Callable[[str, Mapping[str, Any]], bool]  # (resource type, inputs) -> excused when granted

    def excuses(self, resource: Resource, settings: Settings) -> bool:
        return settings.get(self.key) is True and self.covers(resource.type, resource.inputs)


@dataclass(frozen=True, kw_only=True)
class Setting:
    """A config property other than a boolean waiver (the advisory waivers of `slurm-patched`): its JSON schema,
    which `pulumi preview` validates the pack config against, and a parser that raises ValueError on a value the
    schema cannot refuse, so `slurm-eks policy` refuses it offline too."""

    key: str
    schema: Mapping[str, Any]
    parse: Callable[[Any, str], object]  # (value, where) -> parsed; ValueError naming where, the value, the fix


@dataclass(frozen=True, kw_only=True)
class ResourceRule:
    name: str
    description: str
    fix: str
    types: frozenset[str]
    check: ResourceCheck
    enforcement: Enforcement = Enforcement.mandatory
    waiver: Waiver | None = None
    setting: Setting | None = None
    # With a setting: (type, inputs, settings) -> messages, run instead of `check`.
    configured_check: Callable[[str, Mapping[str, Any], Settings], list[str]] | None = None

    @property
    def config_schema(self) -> dict[str, dict[str, Any]]:
        """JSON schema of each config property (pulumi-policy's PolicyConfigSchema.properties)."""
        schema = {self.setting.key: dict(self.setting.schema)} if self.setting else {}
        if self.waiver is not None:
            schema[self.waiver.key] = {"type": "boolean", "default": False, "description": self.waiver.description}
        return schema

    def evaluate(self, resource: Resource, settings: Settings = NO_SETTINGS) -> list[Finding]:
        if resource.type not in self.types or (self.waiver and self.waiver.excuses(resource, settings)):
            return []
        messages = (self.configured_check(resource.type, resource.inputs, settings) if self.configured_check
                    else self.check(resource.type, resource.inputs))
        return [violation(self, resource.urn, m) for m in messages]


@dataclass(frozen=True, kw_only=True)
class StackRule:
    name: str
    description: str
    fix: str
    check: StackCheck
    enforcement: Enforcement = Enforcement.mandatory

    @property
    def config_schema(self) -> dict[str, dict[str, Any]]:
        return {}  # no stack rule takes settings yet

    def evaluate(self, resources: Sequence[Resource]) -> list[Finding]:
        return [violation(self, urn, m) for urn, m in self.check(resources)]


Rule = ResourceRule | StackRule


def dig(value: Any, *path: str) -> Any:
    """value[path[0]][path[1]]..., or None where a level is missing or not an object."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def items(value: Any) -> list[Any]:
    """A list input as a list: missing or unknown -> []."""
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def enabled(value: Any) -> bool:
    """A flag that is on, or not known until deploy. Some provider schemas carry booleans as strings
    (a launch template's `encrypted: "true"`)."""
    return value is True or value in ("true", UNKNOWN)
