"""Validate rendered Kubernetes manifests as strictly as the API server would on create.

Custom resources are checked against the CRDs in a `SchemaRegistry` (structural schema + CEL rules),
built-in kinds against kubernetes-validate's strict schemas for Kubernetes `KUBERNETES_VERSION`; a kind in
neither is a problem of its own, never a silent pass.

    registry = SchemaRegistry.from_crd_dirs([Path("../shared/crds")])
    for file, problems in validate_manifest_dir(Path("build/dev/manifests"), registry).items(): ...
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from scripts.manifests.core_schema import KUBERNETES_VERSION, core_schemas
from scripts.manifests.crd_schema import SchemaRegistry
from scripts.manifests.field_paths import FieldError
from scripts.manifests.object_meta import name_rule_for, validate_object_meta
from scripts.manifests.structural_validation import validate_custom_resource

__all__ = [
    "KUBERNETES_VERSION",
    "ManifestProblem",
    "SchemaRegistry",
    "load_manifest_documents",
    "validate_manifest",
    "validate_manifest_dir",
]


@dataclass(frozen=True)
class ManifestProblem:
    kind: str
    name: str
    path: str  # e.g. "spec.template.spec.requirements[0].values"; "" is the whole document
    message: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}: {self.path or '<document>'}: {self.message}"


class _ManifestLoader(yaml.CSafeLoader):
    """YAML as kubectl reads it: timestamps stay strings (the API server receives JSON strings)."""


_ManifestLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}


def load_manifest_documents(path: Path) -> list[Any]:
    """Every non-empty YAML document in one file."""
    with path.open() as stream:
        return [doc for doc in yaml.load_all(stream, Loader=_ManifestLoader) if doc is not None]


def validate_manifest(doc: Mapping[str, Any], registry: SchemaRegistry) -> list[ManifestProblem]:
    """Every problem in one Kubernetes object; an empty list means the API server would accept it."""
    if not isinstance(doc, Mapping):
        return [ManifestProblem("?", "?", "", f"a manifest must be a mapping, not {type(doc).__name__}")]
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    meta = doc.get("metadata")
    name = str(meta.get("name") or meta.get("generateName") or "?") if isinstance(meta, Mapping) else "?"
    if not (isinstance(api_version, str) and api_version and isinstance(kind, str) and kind):
        missing = FieldError(
            "apiVersion" if not api_version else "kind", "Required value: a non-empty string"
        )
        return [ManifestProblem(str(kind or "?"), name, missing.path, missing.message)]
    crd = registry.lookup(api_version, kind)
    core = core_schemas()
    if crd is not None:
        errors = validate_custom_resource(doc, crd)
    elif core.knows(api_version, kind):
        errors = core.validate(doc)
        if meta is None or isinstance(meta, Mapping):
            errors += validate_object_meta(meta or {}, "metadata", name_rule_for(api_version, kind))
    else:
        errors = [FieldError("", f"no schema for {api_version}/{kind}")]
    return [ManifestProblem(kind, name, e.path, e.message) for e in errors]


def validate_manifest_dir(directory: Path, registry: SchemaRegistry) -> dict[Path, list[ManifestProblem]]:
    """Problems per YAML file under `directory` (every file is a key; clean files map to [])."""
    results: dict[Path, list[ManifestProblem]] = {}
    for path in sorted(
        p for p in Path(directory).rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()
    ):
        try:
            documents = load_manifest_documents(path)
        except yaml.YAMLError as exc:
            results[path] = [ManifestProblem("?", "?", "", f"not valid YAML: {exc}")]
            continue
        results[path] = [problem for doc in documents for problem in validate_manifest(doc, registry)]
    return results
