"""What the API server checks in `metadata` beyond its types: names, namespaces, label and annotation keys.

Types and unknown fields in `metadata` are left to the ObjectMeta schema (see core_schema); this module only
looks at values that already have the right type, so one mistake is reported once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from scripts.manifests.field_paths import FieldError, entry, field, shown

NameRule = Callable[[str], list[str]]

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_ANNOTATIONS_MAX_BYTES = 256 * 1024


def dns1123_subdomain(value: str) -> list[str]:
    problems = []
    if len(value) > 253:
        problems.append("must be no more than 253 characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character (e.g. 'example.com')"
        )
    return problems


def dns1123_label(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS1123_LABEL.fullmatch(value):
        problems.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character (e.g. 'my-name')"
        )
    return problems


def dns1035_label(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _DNS1035_LABEL.fullmatch(value):
        problems.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
            "alphabetic character, and end with an alphanumeric character (e.g. 'my-name')"
        )
    return problems


def path_segment(value: str) -> list[str]:
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in value]


# Names the API server validates differently from the usual DNS-1123 subdomain, by (API group, kind).
_RBAC = "rbac.authorization.k8s.io"
_NAME_RULES: dict[tuple[str, str], NameRule] = {
    ("", "Namespace"): dns1123_label,
    ("", "Service"): dns1035_label,
    (_RBAC, "Role"): path_segment,
    (_RBAC, "ClusterRole"): path_segment,
    (_RBAC, "RoleBinding"): path_segment,
    (_RBAC, "ClusterRoleBinding"): path_segment,
}


def name_rule_for(api_version: str, kind: str) -> NameRule:
    """The rule `metadata.name` must follow for a kind; custom resources use DNS-1123 subdomains."""
    group = api_version.rpartition("/")[0]
    return _NAME_RULES.get((group, kind), dns1123_subdomain)


def qualified_name(key: str) -> list[str]:
    """Label and annotation keys: an optional DNS subdomain prefix, '/', and a name of at most 63 chars."""
    parts = key.split("/")
    if len(parts) > 2:
        return ["a qualified name may contain at most one '/'"]
    problems = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part must be non-empty")
        problems += [f"prefix part {p}" for p in dns1123_subdomain(prefix) if prefix]
    name = parts[-1]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if name and not _QUALIFIED_NAME_PART.fullmatch(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        )
    return problems


def label_value(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if value and not _QUALIFIED_NAME_PART.fullmatch(value):
        problems.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return problems


def validate_object_meta(
    meta: Mapping[str, Any], path: str, name_rule: NameRule, *, name_required: bool = True
) -> list[FieldError]:
    """Name (or generateName), namespace, labels and annotations of one `metadata` mapping."""
    errors: list[FieldError] = []
    name, generate_name = meta.get("name"), meta.get("generateName")
    if isinstance(name, str) and name:
        errors += [
            FieldError(field(path, "name"), f"Invalid value: {shown(name)}: {p}") for p in name_rule(name)
        ]
    elif isinstance(generate_name, str) and generate_name:
        # A prefix may end in '-': the server appends random characters before checking the name.
        prefix = generate_name[:-1] + "a" if generate_name.endswith("-") else generate_name
        errors += [
            FieldError(field(path, "generateName"), f"Invalid value: {shown(generate_name)}: {p}")
            for p in name_rule(prefix)
        ]
    elif name_required:
        errors.append(FieldError(field(path, "name"), "Required value: name or generateName is required"))
    namespace = meta.get("namespace")
    if isinstance(namespace, str) and namespace:
        errors += [
            FieldError(field(path, "namespace"), f"Invalid value: {shown(namespace)}: {p}")
            for p in dns1123_label(namespace)
        ]
    errors += _key_value_errors(meta.get("labels"), field(path, "labels"), qualified_name, label_value)
    annotations = meta.get("annotations")
    # Annotation keys are checked lower-cased; their values are free text.
    errors += _key_value_errors(
        annotations, field(path, "annotations"), lambda key: qualified_name(key.lower()), lambda _: []
    )
    if isinstance(annotations, Mapping):
        size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
        if size > _ANNOTATIONS_MAX_BYTES:
            errors.append(
                FieldError(
                    field(path, "annotations"), f"Too long: must have at most {_ANNOTATIONS_MAX_BYTES} bytes"
                )
            )
    return errors


def _key_value_errors(mapping: Any, path: str, key_rule: NameRule, value_rule: NameRule) -> list[FieldError]:
    if not isinstance(mapping, Mapping):
        return []
    errors = []
    for key, value in mapping.items():
        if not isinstance(key, str):
            continue
        errors += [FieldError(path, f"Invalid value: {shown(key)}: {p}") for p in key_rule(key)]
        if isinstance(value, str):
            errors += [
                FieldError(entry(path, key), f"Invalid value: {shown(value)}: {p}") for p in value_rule(value)
            ]
    return errors
