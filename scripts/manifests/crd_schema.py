"""CustomResourceDefinitions loaded into typed schema trees, keyed by (apiVersion, kind).

A CRD's `openAPIV3Schema` is parsed once into `SchemaNode`s: patterns and CEL rules are compiled here, so
validating many documents only walks the tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2
import yaml

from scripts.manifests.cel_rules import CelRule
from scripts.manifests.field_paths import entry
from scripts.manifests.field_paths import field as field_path

_NO_DEFAULT = object()


@dataclass(eq=False)
class SchemaNode:
    """One node of a structural schema, with only the keywords the API server acts on."""

    type: str | None = None
    properties: dict[str, SchemaNode] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    additional_properties: SchemaNode | bool | None = None  # None: not given
    items: SchemaNode | None = None
    enum: tuple[Any, ...] | None = None
    pattern: str | None = None
    compiled_pattern: Any = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    multiple_of: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    min_properties: int | None = None
    max_properties: int | None = None
    format: str | None = None
    default: Any = _NO_DEFAULT
    nullable: bool = False
    preserve_unknown_fields: bool = False
    embedded_resource: bool = False
    int_or_string: bool = False
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    any_of: tuple[SchemaNode, ...] = ()
    all_of: tuple[SchemaNode, ...] = ()
    one_of: tuple[SchemaNode, ...] = ()
    not_: SchemaNode | None = None
    rules: tuple[CelRule, ...] = ()

    @property
    def has_default(self) -> bool:
        return self.default is not _NO_DEFAULT


def parse_schema(raw: Mapping[str, Any]) -> SchemaNode:
    """Turn one OpenAPI v3 schema mapping (as found in a CRD) into a SchemaNode tree."""
    additional = raw.get("additionalProperties")
    pattern = raw.get("pattern")
    return SchemaNode(
        type=raw.get("type"),
        properties={name: parse_schema(sub) for name, sub in (raw.get("properties") or {}).items()},
        required=tuple(raw.get("required") or ()),
        additional_properties=parse_schema(additional) if isinstance(additional, Mapping) else additional,
        items=parse_schema(raw["items"]) if isinstance(raw.get("items"), Mapping) else None,
        enum=tuple(raw["enum"]) if "enum" in raw else None,
        pattern=pattern,
        compiled_pattern=re2.compile(pattern) if pattern is not None else None,
        minimum=raw.get("minimum"),
        maximum=raw.get("maximum"),
        exclusive_minimum=bool(raw.get("exclusiveMinimum", False)),
        exclusive_maximum=bool(raw.get("exclusiveMaximum", False)),
        multiple_of=raw.get("multipleOf"),
        min_length=raw.get("minLength"),
        max_length=raw.get("maxLength"),
        min_items=raw.get("minItems"),
        max_items=raw.get("maxItems"),
        min_properties=raw.get("minProperties"),
        max_properties=raw.get("maxProperties"),
        format=raw.get("format"),
        default=raw.get("default", _NO_DEFAULT),
        nullable=bool(raw.get("nullable", False)),
        preserve_unknown_fields=bool(raw.get("x-kubernetes-preserve-unknown-fields", False)),
        embedded_resource=bool(raw.get("x-kubernetes-embedded-resource", False)),
        int_or_string=bool(raw.get("x-kubernetes-int-or-string", False)),
        list_type=raw.get("x-kubernetes-list-type"),
        list_map_keys=tuple(raw.get("x-kubernetes-list-map-keys") or ()),
        any_of=tuple(parse_schema(s) for s in raw.get("anyOf") or ()),
        all_of=tuple(parse_schema(s) for s in raw.get("allOf") or ()),
        one_of=tuple(parse_schema(s) for s in raw.get("oneOf") or ()),
        not_=parse_schema(raw["not"]) if isinstance(raw.get("not"), Mapping) else None,
        rules=tuple(CelRule.from_schema(r) for r in raw.get("x-kubernetes-validations") or ()),
    )


@dataclass(frozen=True)
class CustomResourceVersion:
    """One served version of one CRD."""

    api_version: str  # group/version
    kind: str
    scope: str  # Namespaced or Cluster
    source: Path
    schema: SchemaNode


@dataclass(frozen=True)
class LocatedRule:
    """A CEL rule and where it sits, for reports on which rules can be evaluated."""

    api_version: str
    kind: str
    path: str  # schema location, e.g. "spec.template.spec.requirements[*]"
    rule: CelRule


class SchemaRegistry:
    """Every served version of every CRD found in some directories."""

    def __init__(self, versions: Iterable[CustomResourceVersion]) -> None:
        self._versions: dict[tuple[str, str], CustomResourceVersion] = {}
        for version in versions:
            key = (version.api_version, version.kind)
            if key in self._versions:
                raise ValueError(
                    f"{version.api_version}/{version.kind} is defined twice: "
                    f"{self._versions[key].source} and {version.source}"
                )
            self._versions[key] = version

    @classmethod
    def from_crd_dirs(cls, paths: Iterable[Path | str]) -> SchemaRegistry:
        """Load every CustomResourceDefinition in *.yaml/*.yml files under the given directories."""
        versions: list[CustomResourceVersion] = []
        for directory in paths:
            directory = Path(directory)
            if not directory.is_dir():
                raise FileNotFoundError(f"CRD directory {directory} does not exist")
            for source in sorted(p for p in directory.rglob("*") if p.suffix in (".yaml", ".yml")):
                versions += _crd_versions(source)
        return cls(versions)

    def lookup(self, api_version: str, kind: str) -> CustomResourceVersion | None:
        return self._versions.get((api_version, kind))

    def __iter__(self) -> Iterator[CustomResourceVersion]:
        return iter(self._versions.values())

    def __len__(self) -> int:
        return len(self._versions)

    def cel_rules(self) -> list[LocatedRule]:
        """Every CEL rule of every served version, in schema order."""
        return [
            LocatedRule(v.api_version, v.kind, path, rule)
            for v in self
            for path, node in _walk_schema(v.schema, "")
            for rule in node.rules
        ]


def _crd_versions(source: Path) -> list[CustomResourceVersion]:
    with source.open() as stream:
        documents = list(yaml.load_all(stream, Loader=yaml.CSafeLoader))
    versions = []
    for crd in documents:
        if not isinstance(crd, Mapping) or crd.get("kind") != "CustomResourceDefinition":
            continue
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", False):
                continue
            try:
                raw_schema = version["schema"]["openAPIV3Schema"]
            except KeyError as exc:
                raise ValueError(
                    f"{source}: {crd['metadata']['name']} {version['name']} has no schema"
                ) from exc
            versions.append(
                CustomResourceVersion(
                    api_version=f"{spec['group']}/{version['name']}",
                    kind=spec["names"]["kind"],
                    scope=spec.get("scope", "Namespaced"),
                    source=source,
                    schema=parse_schema(raw_schema),
                )
            )
    return versions


def _walk_schema(node: SchemaNode, path: str) -> Iterator[tuple[str, SchemaNode]]:
    yield path, node
    for name, child in node.properties.items():
        yield from _walk_schema(child, field_path(path, name))
    if isinstance(node.additional_properties, SchemaNode):
        yield from _walk_schema(node.additional_properties, entry(path, "*"))
    if node.items is not None:
        yield from _walk_schema(node.items, entry(path, "*"))
