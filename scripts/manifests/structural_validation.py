"""One custom resource checked against its CRD's structural schema, as the API server does on create.

The order follows the server: nulls in non-nullable fields are pruned, defaults applied, unknown fields
rejected (strict field validation, not the silent pruning a plain `kubectl apply` gets), types and value
constraints checked, and then the CEL rules run on the defaulted object. A rule is skipped where the
value below it has a wrong type, since its verdict would be about the type error again.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from scripts.manifests.core_schema import core_schemas
from scripts.manifests.crd_schema import CustomResourceVersion, SchemaNode
from scripts.manifests.field_paths import FieldError, entry, field, shown
from scripts.manifests.object_meta import dns1123_subdomain, validate_object_meta
from scripts.manifests.string_formats import STRING_FORMATS

_RESOURCE_FIELDS = ("apiVersion", "kind", "metadata")


def validate_custom_resource(document: Mapping[str, Any], crd: CustomResourceVersion) -> list[FieldError]:
    """Every problem the API server would report when creating `document` as `crd`'s kind."""
    meta = document.get("metadata")
    errors = _metadata_errors(meta, "metadata", name_required=True)
    if isinstance(meta, Mapping):
        # A CRD may constrain metadata.name/generateName further (only those two fields).
        meta_schema = crd.schema.properties.get("metadata")
        for key, sub in (meta_schema.properties if meta_schema else {}).items():
            if key in meta:
                errors += _Validation(value_only=True).run(sub, meta[key], field("metadata", key))
    return errors + _Validation(value_only=False).run(crd.schema, dict(document), "")


def _metadata_errors(meta: Any, path: str, *, name_required: bool) -> list[FieldError]:
    errors = core_schemas().validate_object_meta(meta if meta is not None else {}, path)
    if isinstance(meta, Mapping) or meta is None:
        errors += validate_object_meta(meta or {}, path, dns1123_subdomain, name_required=name_required)
    return errors


class _Validation:
    """One walk over a value; `value_only` is for anyOf/allOf/oneOf/not branches, which may only
    constrain values (no unknown-field errors, defaults or rules, as structural schemas require)."""

    def __init__(self, *, value_only: bool) -> None:
        self.value_only = value_only
        self.errors: list[FieldError] = []

    def run(self, schema: SchemaNode, value: Any, path: str) -> list[FieldError]:
        self.node(schema, value, path)
        return self.errors

    def error(self, path: str, message: str) -> None:
        self.errors.append(FieldError(path, message))

    def node(self, schema: SchemaNode, value: Any, path: str) -> tuple[Any, bool]:
        """The value as the server would store it, and whether every type below it was right."""
        if value is None and schema.nullable:
            return None, True
        if not _has_type(schema, value):
            self.error(path, f"Invalid value: {shown(value)}: must be of type {_expected_type(schema)}")
            return value, False
        if isinstance(value, Mapping):
            value, well_typed = self.object(schema, value, path)
        elif isinstance(value, list):
            value, well_typed = self.array(schema, value, path)
        else:
            self.scalar(schema, value, path)
            value, well_typed = _normalized_number(schema, value), True
        if schema.enum is not None and not any(_same_json(value, allowed) for allowed in schema.enum):
            supported = ", ".join(shown(v) for v in schema.enum)
            self.error(path, f"Unsupported value: {shown(value)}: supported values: {supported}")
        self.branches(schema, value, path)
        if well_typed and not self.value_only:
            self.rules(schema, value, path)
        return value, well_typed

    def object(self, schema: SchemaNode, value: Mapping[Any, Any], path: str) -> tuple[dict[str, Any], bool]:
        out: dict[str, Any] = {}
        well_typed = True
        holds_resource = schema.embedded_resource or not path
        for key, child in value.items():
            if not isinstance(key, str):
                self.error(path, f"Invalid value: {shown(key)}: field names must be strings")
                well_typed = False
                continue
            if key == "metadata" and holds_resource:
                out[key] = _visible_metadata(child)  # its own checks are ObjectMeta's
                continue
            sub, child_path = schema.properties.get(key), field(path, key)
            if sub is None and isinstance(schema.additional_properties, SchemaNode):
                sub, child_path = schema.additional_properties, entry(path, key)
            if sub is None:
                if (
                    self.value_only
                    or schema.preserve_unknown_fields
                    or schema.additional_properties is True
                    or (holds_resource and key in _RESOURCE_FIELDS)
                ):
                    out[key] = child
                else:
                    self.error(child_path, f'unknown field "{child_path}"')
                continue
            if child is None and not sub.nullable:
                if not sub.has_default:
                    continue  # pruned by the server, as if never written
                child = copy.deepcopy(sub.default)
            out[key], child_typed = self.node(sub, child, child_path)
            well_typed = well_typed and child_typed
        if not self.value_only:
            for key, sub in schema.properties.items():
                if key not in out and sub.has_default:
                    out[key], _ = self.node(sub, copy.deepcopy(sub.default), field(path, key))
        for key in schema.required:
            if key not in out:
                self.error(field(path, key), "Required value")
        if schema.embedded_resource and not self.value_only:
            self.embedded_resource(value, path)
        self.count(len(out), schema.min_properties, schema.max_properties, "properties", path)
        return out, well_typed

    def embedded_resource(self, value: Mapping[str, Any], path: str) -> None:
        for key in ("apiVersion", "kind"):
            if not (isinstance(value.get(key), str) and value[key]):
                self.error(field(path, key), "Required value: must not be empty")
        if "metadata" in value:
            self.errors += _metadata_errors(value["metadata"], field(path, "metadata"), name_required=False)

    def array(self, schema: SchemaNode, value: list[Any], path: str) -> tuple[list[Any], bool]:
        out: list[Any] = []
        well_typed = True
        for index, item in enumerate(value):
            if schema.items is None:
                out.append(item)
                continue
            item, item_typed = self.node(schema.items, item, entry(path, index))
            out.append(item)
            well_typed = well_typed and item_typed
        self.count(len(out), schema.min_items, schema.max_items, "items", path)
        if schema.list_type == "set":
            for index in _duplicates(out):
                self.error(entry(path, index), f"Duplicate value: {shown(out[index])}")
        elif schema.list_type == "map":
            keys = [
                {k: item.get(k) for k in schema.list_map_keys} if isinstance(item, Mapping) else item
                for item in out
            ]
            for index in _duplicates(keys):
                self.error(entry(path, index), f"Duplicate value: {shown(keys[index])}")
        return out, well_typed

    def count(self, size: int, least: int | None, most: int | None, noun: str, path: str) -> None:
        if least is not None and size < least:
            self.error(path, f"Invalid value: {size}: must have at least {least} {noun}")
        if most is not None and size > most:
            self.error(path, f"Too many: {size}: must have at most {most} {noun}")

    def scalar(self, schema: SchemaNode, value: Any, path: str) -> None:
        if isinstance(value, str):
            if schema.min_length is not None and len(value) < schema.min_length:
                self.error(
                    path, f"Invalid value: {shown(value)}: must be at least {schema.min_length} chars long"
                )
            if schema.max_length is not None and len(value) > schema.max_length:
                self.error(path, f"Too long: {shown(value)}: may not be more than {schema.max_length} chars")
            if schema.compiled_pattern is not None and not schema.compiled_pattern.search(value):
                self.error(path, f"Invalid value: {shown(value)}: should match '{schema.pattern}'")
            check = STRING_FORMATS.get(schema.format or "")
            if check is not None and not check(value):
                self.error(path, f"Invalid value: {shown(value)}: must be in {schema.format} format")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            if schema.minimum is not None and (
                value <= schema.minimum if schema.exclusive_minimum else value < schema.minimum
            ):
                relation = "greater than" if schema.exclusive_minimum else "greater than or equal to"
                self.error(path, f"Invalid value: {shown(value)}: should be {relation} {schema.minimum}")
            if schema.maximum is not None and (
                value >= schema.maximum if schema.exclusive_maximum else value > schema.maximum
            ):
                relation = "less than" if schema.exclusive_maximum else "less than or equal to"
                self.error(path, f"Invalid value: {shown(value)}: should be {relation} {schema.maximum}")
            if schema.multiple_of and (value / schema.multiple_of) % 1:
                self.error(
                    path, f"Invalid value: {shown(value)}: should be a multiple of {schema.multiple_of}"
                )

    def branches(self, schema: SchemaNode, value: Any, path: str) -> None:
        for branch in schema.all_of:
            self.errors += _Validation(value_only=True).run(branch, value, path)
        if schema.any_of and not any(_passes(branch, value) for branch in schema.any_of):
            self.error(path, f"Invalid value: {shown(value)}: must validate at least one schema (anyOf)")
        if schema.one_of and sum(_passes(branch, value) for branch in schema.one_of) != 1:
            self.error(path, f"Invalid value: {shown(value)}: must validate one and only one schema (oneOf)")
        if schema.not_ is not None and _passes(schema.not_, value):
            self.error(path, f"Invalid value: {shown(value)}: must not validate the schema (not)")

    def rules(self, schema: SchemaNode, value: Any, path: str) -> None:
        for rule in schema.rules:
            if rule.is_transition:
                continue  # compares with the stored object, which a create does not have
            message = rule.failure_message(value)
            if message is not None:
                self.error(_rule_path(path, rule.field_path), message)


def _visible_metadata(meta: Any) -> Any:
    """CEL rules may read only the name and generateName of an object's metadata."""
    if not isinstance(meta, Mapping):
        return meta
    return {k: v for k, v in meta.items() if k in ("name", "generateName")}


def _passes(schema: SchemaNode, value: Any) -> bool:
    return not _Validation(value_only=True).run(schema, value, "")


def _has_type(schema: SchemaNode, value: Any) -> bool:
    if schema.int_or_string:
        return isinstance(value, str) or _is_integer(value)
    if schema.type is None:
        return True
    if schema.type == "integer":
        return _is_integer(value)
    if schema.type == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return _json_type(value) == schema.type


def _is_integer(value: Any) -> bool:
    # JSON has one number type: 3.0 decodes as an integer on the server (Pulumi's mocks turn 3 into 3.0).
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _normalized_number(schema: SchemaNode, value: Any) -> Any:
    """Numbers typed as the schema says, so CEL sees int where the schema says integer."""
    if isinstance(value, float) and (schema.type == "integer" or schema.int_or_string):
        return int(value)
    if schema.type == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _expected_type(schema: SchemaNode) -> str:
    return "integer or string" if schema.int_or_string else str(schema.type)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for python_type, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, python_type):
            return name
    if isinstance(value, Mapping):
        return "object"
    return "array" if isinstance(value, list) else type(value).__name__


def _same_json(a: Any, b: Any) -> bool:
    return _json_type(a) == _json_type(b) and a == b


def _duplicates(values: list[Any]) -> Iterator[int]:
    seen: set[str] = set()
    for index, value in enumerate(values):
        key = json.dumps(value, sort_keys=True, default=str)
        if key in seen:
            yield index
        seen.add(key)


def _rule_path(path: str, field_path: str | None) -> str:
    """A rule's `fieldPath` (like `.spec.replicas`) is relative to where the rule sits."""
    if not field_path:
        return path
    return path + field_path if field_path.startswith("[") else field(path, field_path.lstrip("."))
