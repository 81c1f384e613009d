"""The offline plan as data: what `pulumi up` would register, with secrets masked, read and written as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SECRET = "[secret]"
UNKNOWN = "[unknown]"
PLAN_FORMAT = 2

# Sentinels of Pulumi's property serialization (sdk/python/lib/pulumi/runtime/rpc.py).
_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SIG_SECRET = "1b47061264138c4ac30d75fd1eb44270"
_SIG_RESOURCE = "5cf8f73096256a8f31e491e813e4eb8e"
_UNKNOWN_VALUE = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
UNKNOWN_WIRE_VALUE = _UNKNOWN_VALUE  # what the mocks answer for an output only `pulumi up` knows

KUBERNETES_SECRET_TYPES = ("kubernetes:core/v1:Secret",)
# Kubernetes types that are not API objects a cluster stores (so they get no manifest file).
NOT_MANIFESTS = ("kubernetes:helm.sh/", "kubernetes:yaml/", "kubernetes:kustomize/")


@dataclass
class PlannedResource:
    urn: str
    type: str
    name: str
    parent: str | None
    provider: str | None
    dependencies: list[str]
    custom: bool
    protect: bool
    retain_on_delete: bool
    inputs: dict[str, Any]
    # The ID the mocks gave it (EC2-style for AWS resources): what other resources' inputs refer to.
    id: str | None = None

    @property
    def is_manifest(self) -> bool:
        return (self.custom and self.type.startswith("kubernetes:")
                and not self.type.startswith(NOT_MANIFESTS) and "kind" in self.inputs)


@dataclass
class Plan:
    stack: str
    project: str
    resources: list[PlannedResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    # What `pulumi up` brings into being without registering it here (made by AWS, or inside a remote
    # component), as the mocks model it from upstream documentation: each entry names its source.
    modelled: list[dict[str, Any]] = field(default_factory=list)
    # The security groups each kind of node and the control plane carry: {"control-plane": [ids], ...}.
    nodes: dict[str, list[str]] = field(default_factory=dict)
    format: int = PLAN_FORMAT

    def by_urn(self) -> dict[str, PlannedResource]:
        return {r.urn: r for r in self.resources}

    def of_type(self, type_: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_]

    def manifests(self) -> list[dict[str, Any]]:
        return [r.inputs for r in self.resources if r.is_manifest]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        resources = [PlannedResource(**r) for r in data.pop("resources")]
        return cls(resources=resources, **data)

    @classmethod
    def load(cls, path: Path) -> Plan:
        """A plan directory (holding plan.json) or a plan.json file."""
        file = path / "plan.json" if path.is_dir() else path
        return cls.from_json(file.read_text())


def sanitize(type_: str, value: Any) -> Any:
    """Pulumi wire values -> plain JSON: secrets masked, integral floats as ints, references as URNs.
    A Kubernetes Secret keeps its keys (they say what it holds) with every value masked; data only `pulumi up`
    can know (read from another secret then) shows as unknown."""
    clean = _clean(value)
    if type_.startswith("pulumi:providers:") and isinstance(clean, dict):
        clean = {k: parse_json_text(v) for k, v in clean.items()}
    if type_ in KUBERNETES_SECRET_TYPES and isinstance(clean, dict):
        revealed = _clean(value, reveal=True)
        for key in ("data", "stringData"):
            if isinstance(revealed.get(key), dict):
                clean[key] = dict.fromkeys(revealed[key], SECRET)
            elif revealed.get(key) == UNKNOWN:
                clean[key] = UNKNOWN
    return clean


def known(value: Any) -> Any:
    """`value` without the fields only `pulumi up` can know (UNKNOWN): the part an offline check can check."""
    if isinstance(value, dict):
        return {k: known(v) for k, v in value.items() if v != UNKNOWN}
    if isinstance(value, list):
        return [known(v) for v in value if v != UNKNOWN]
    return value


def parse_json_text(value: Any) -> Any:
    """JSON text (provider inputs, a ConfigMap's document) as the object it holds, so diffs point at the changed
    key; any other value as it is."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def plain(value: Any) -> Any:
    """Wire values -> plain JSON with secrets unwrapped: what a mock provider sees as its inputs."""
    return _clean(value, reveal=True)


def _clean(value: Any, reveal: bool = False) -> Any:
    if isinstance(value, dict):
        sig = value.get(_SIG_KEY)
        if sig == _SIG_SECRET:
            return _clean(value.get("value"), reveal) if reveal else SECRET
        if sig == _SIG_RESOURCE:
            return value.get("urn")
        return {k: _clean(v, reveal) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, reveal) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire format carries every number as a double
    if value == _UNKNOWN_VALUE:
        return UNKNOWN
    return value
