"""Built-in Kubernetes kinds, validated strictly against the OpenAPI schemas kubernetes-validate bundles.

kubernetes-validate's own `validate()` reloads the 1.4 MB definitions file on every call and stops at the
first error; here each kind's validator is built once and every error is reported.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Any

import jsonschema
import referencing
import referencing.jsonschema

from scripts.manifests.field_paths import FieldError, entry, field, path_of, shown
from scripts.manifests.string_formats import STRING_FORMATS

# kubernetes-validate 1.37 bundles 1.25 through 1.37; 1.33 is the version the stacks deploy.
KUBERNETES_VERSION = "1.33"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


class CoreSchemas:
    """The strict JSON schemas of one Kubernetes version's built-in kinds."""

    def __init__(self, version: str = KUBERNETES_VERSION) -> None:
        self.version = version
        self._folder = (
            resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v{version}.0-local-strict"
        )
        if not self._folder.is_dir():
            raise ValueError(f"kubernetes-validate bundles no schemas for Kubernetes {version}")
        definitions = json.loads((self._folder / "_definitions.json").read_text())
        self._format_checker = _format_checker()
        self._registry: referencing.Registry = referencing.Registry().with_resource(
            definitions["$id"], referencing.jsonschema.DRAFT202012.create_resource(definitions)
        )
        self._object_meta = self._validator({"$ref": f"{definitions['$id']}#/$defs/{_OBJECT_META}"})
        self._kinds: dict[tuple[str, str], jsonschema.Draft202012Validator | None] = {}

    def _validator(self, schema: Mapping[str, Any]) -> jsonschema.Draft202012Validator:
        return jsonschema.Draft202012Validator(
            schema, registry=self._registry, format_checker=self._format_checker
        )

    def _kind_validator(self, api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
        key = (api_version, kind)
        if key not in self._kinds:
            self._kinds[key] = self._load_kind(api_version, kind)
        return self._kinds[key]

    def _load_kind(self, api_version: str, kind: str) -> jsonschema.Draft202012Validator | None:
        group, _, version = api_version.rpartition("/")
        # kubernetes-validate names files by the group's first label: rbac.authorization.k8s.io/v1 -> rbac-v1.
        stem = "-".join(filter(None, (kind.lower(), group.split(".")[0], version)))
        source = self._folder / f"{stem}.json"
        if not source.is_file():
            return None
        schema = json.loads(source.read_text())
        # The file name drops most of the group; the schema's own GVK says whether it is really this kind.
        if {"group": group, "version": version, "kind": kind} not in schema.get(
            "x-kubernetes-group-version-kind", []
        ):
            return None
        return self._validator(schema)

    def knows(self, api_version: str, kind: str) -> bool:
        """Whether `api_version`/`kind` is a built-in kind of this Kubernetes version."""
        return self._kind_validator(api_version, kind) is not None

    def validate(self, document: Mapping[str, Any]) -> list[FieldError]:
        """Every schema error of a built-in object (its kind must be one `knows` accepts)."""
        validator = self._kind_validator(document["apiVersion"], document["kind"])
        if validator is None:
            raise KeyError(f"{document['apiVersion']}/{document['kind']} is not a built-in kind")
        return _field_errors(validator.iter_errors(document), "")

    def validate_object_meta(self, meta: Any, path: str) -> list[FieldError]:
        """Types and unknown fields of a `metadata` mapping (ObjectMeta) found at `path`."""
        return _field_errors(self._object_meta.iter_errors(meta), path)


def _format_checker() -> jsonschema.FormatChecker:
    """Only the formats the API server enforces (e.g. Secret data must be base64), as for custom resources."""
    checker = jsonschema.FormatChecker(formats=())
    for name, check in STRING_FORMATS.items():
        checker.checks(name)(lambda value, check=check: not isinstance(value, str) or check(value))
    return checker


@functools.cache
def core_schemas() -> CoreSchemas:
    return CoreSchemas()


def _field_errors(errors: Iterator[jsonschema.ValidationError], start: str) -> list[FieldError]:
    """Errors as field errors under `start`, one per unknown or missing field, without duplicates."""
    found = dict.fromkeys(_each_field_error(errors, start))
    return sorted(found, key=lambda e: e.path)


def _each_field_error(errors: Iterator[jsonschema.ValidationError], start: str) -> Iterator[FieldError]:
    for error in errors:
        path = _instance_path(error, start)
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            declared = error.schema.get("properties", {})
            for name in error.instance:
                if name not in declared:
                    yield FieldError(field(path, name), f'unknown field "{field(path, name)}"')
        elif error.validator == "required" and isinstance(error.instance, Mapping):
            for name in error.validator_value:
                if name not in error.instance:
                    yield FieldError(field(path, name), "Required value")
        elif error.validator == "enum":
            supported = ", ".join(shown(v) for v in error.validator_value)
            yield FieldError(
                path, f"Unsupported value: {shown(error.instance)}: supported values: {supported}"
            )
        elif error.validator == "type":
            expected = error.validator_value
            expected = [t for t in expected if t != "null"] if isinstance(expected, list) else [expected]
            yield FieldError(
                path, f"Invalid value: {shown(error.instance)}: must be of type {' or '.join(expected)}"
            )
        else:
            yield FieldError(path, f"Invalid value: {shown(error.instance)}: {error.message}")


def _instance_path(error: jsonschema.ValidationError, start: str) -> str:
    """Where the error is, with map keys as `[key]` and fields as `.name` (the schema path tells which)."""
    parts = list(error.absolute_path)
    keywords = iter(error.schema_path)
    path, used = start, 0
    for keyword in keywords:
        if used == len(parts):
            break
        if keyword in ("properties", "patternProperties"):
            path = field(path, parts[used]) if keyword == "properties" else entry(path, parts[used])
            next(keywords, None)  # the property name or pattern that follows the keyword
        elif keyword in ("additionalProperties", "items"):
            path = entry(path, parts[used])
        else:
            continue
        used += 1
    return path if used == len(parts) else path_of(parts, start)
