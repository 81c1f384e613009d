"""How the operator lays a user's template and container fields over what it builds itself.

Ports, on Kubernetes dicts (camelCase, as the plan gives them):

* slurm-operator v1.2.1 internal/builder/common/container.go BuildContainer: args are concatenated (base
  first), a probe the user gives replaces the handler of the operator's probe of the same kind, then a
  strategic merge patch of the user's container onto the operator's.
* slurm-operator v1.2.1 internal/builder/common/pod_template.go BuildPodTemplate: containers and
  initContainers are concatenated (structutils.MergeList is plain concatenation, no merge by name), then a
  strategic merge patch of the user's pod spec onto the operator's.
* slurm-operator v1.2.1 internal/utils/structutils/kube.go StrategicMergePatch and cleanAndMarshal/removeEmpty:
  empty values (None, "", 0, False, empty maps) are pruned from the patch's maps (not inside lists) so they
  cannot clear the operator's values.
* k8s.io/apimachinery v0.36.2 pkg/util/strategicpatch/patch.go mergeMap, mergeSlice,
  mergeSliceWithoutSpecialElements, partitionMapsByPresentInList, normalizeElementOrder, mergeSortedSlice,
  deduplicateScalars, with MergeOptions{MergeParallelList: true, IgnoreUnmatchedNulls: true}
  (StrategicMergeMapPatchUsingLookupPatchMeta). Lists merge by key only where k8s.io/api v0.36.2
  core/v1/types.go tags `patchStrategy:"merge"` (table below); every other list is replaced whole (so a
  template's tolerations or dnsConfig.searches replace the operator's). Order of a merged list: the user's
  new items first, in their order, then the operator's (mergeSortedSlice puts a patch item that is not in the
  original before the remaining original items).

Not ported: patch directives ($patch, $retainKeys, $setElementOrder, $deleteFromPrimitiveList) -- a plan's
objects carry none -- and the Go JSON round trip's dropping of unknown fields.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Field:
    """A field's patch metadata: `merge` lists merge by `key` (None for lists of scalars); `schema` is the
    struct below it (for a list, its element)."""

    merge: bool = False
    key: str | None = None
    schema: Mapping[str, Field] = field(default_factory=dict)


_PLAIN = Field()

# k8s.io/api v0.36.2 core/v1/types.go Container: ports (containerPort), env (name), volumeMounts (mountPath),
# volumeDevices (devicePath).
CONTAINER: Mapping[str, Field] = {
    "ports": Field(True, "containerPort"),
    "env": Field(True, "name"),
    "volumeMounts": Field(True, "mountPath"),
    "volumeDevices": Field(True, "devicePath"),
}
# k8s.io/api v0.36.2 core/v1/types.go PodSpec.
POD_SPEC: Mapping[str, Field] = {
    "volumes": Field(True, "name"),
    "initContainers": Field(True, "name", CONTAINER),
    "containers": Field(True, "name", CONTAINER),
    "ephemeralContainers": Field(True, "name", CONTAINER),
    "imagePullSecrets": Field(True, "name"),
    "hostAliases": Field(True, "ip"),
    "topologySpreadConstraints": Field(True, "topologyKey"),
    "schedulingGates": Field(True, "name"),
    "resourceClaims": Field(True, "name"),
}
# k8s.io/apimachinery v0.36.2 pkg/apis/meta/v1/types.go ObjectMeta.
OBJECT_META: Mapping[str, Field] = {"ownerReferences": Field(True, "uid"), "finalizers": Field(True, None)}
POD_TEMPLATE_SPEC: Mapping[str, Field] = {"metadata": Field(schema=OBJECT_META), "spec": Field(schema=POD_SPEC)}

_PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")  # core/v1 ProbeHandler's fields


def _kind(value: Any) -> str:
    """Go's reflect type of a decoded JSON value (every number is a float64)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list | tuple):
        return "list"
    raise TypeError(f"not a JSON value: {value!r}")


def _is_empty(value: Any) -> bool:
    """slurm-operator v1.2.1 internal/utils/reflectutils/reflect.go IsEmpty on a decoded JSON value: the Go
    zero value ("" / 0 / false / nil). A non-nil empty list is not its type's zero value (DeepEqual([]{}, nil)
    is false), but Go's json.Marshal already dropped it: every list field the builders meet is `omitempty`."""
    if value is None:
        return True
    if isinstance(value, bool):
        return value is False
    if isinstance(value, int | float | str):
        return not value
    return isinstance(value, list | tuple) and not value


def clean_patch(obj: Mapping[str, Any]) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/utils/structutils/kube.go cleanAndMarshal/removeEmpty: recursively drop
    empty values from maps, and maps left empty; lists are kept as they are (removeEmpty does not enter them)."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if _is_empty(value):
            continue
        if isinstance(value, Mapping):
            sub = clean_patch(value)
            if sub:
                out[key] = sub
            continue
        out[key] = copy.deepcopy(value)
    return out


def _discard_nulls(value: Any) -> Any:
    """patch.go discardNullValuesFromPatch (IgnoreUnmatchedNulls): null fields of a value taken whole."""
    if isinstance(value, Mapping):
        return {k: _discard_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_discard_nulls(v) for v in value]
    return value


def merge_map(original: Mapping[str, Any], patch: Mapping[str, Any], schema: Mapping[str, Field]) -> dict[str, Any]:
    """k8s apimachinery strategicpatch patch.go mergeMap (without directives)."""
    out = copy.deepcopy(dict(original))
    for key, patch_value in patch.items():
        if patch_value is None:  # a null deletes the key (and is not kept: IgnoreUnmatchedNulls)
            out.pop(key, None)
            continue
        if key not in out or _kind(out[key]) != _kind(patch_value):
            out[key] = _discard_nulls(copy.deepcopy(patch_value))
            continue
        meta = schema.get(key, _PLAIN)
        current = out[key]
        if isinstance(current, Mapping):
            out[key] = merge_map(current, patch_value, meta.schema)
        elif isinstance(current, list | tuple):
            out[key] = merge_slice(list(current), list(patch_value), meta) if meta.merge else copy.deepcopy(
                list(patch_value))
        else:
            out[key] = patch_value
    return out


def _dedupe_scalars(items: list[Any]) -> list[Any]:
    """patch.go deduplicateScalars, including its reordering (a duplicate is replaced by the last element)."""
    s = list(items)
    length = len(s) - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if s[i] == s[j]:
                s[j] = s[length]
                s = s[:length]
                length -= 1
                j -= 1
            j += 1
        i += 1
    return s


def _index(items: list[Any], value: Any, key: str | None) -> int:
    """patch.go index: position of the item with the same merge-key value (or the same scalar), else -1."""
    for i, item in enumerate(items):
        if key is None:
            if item == value:
                return i
        elif isinstance(item, Mapping) and key in item and isinstance(value, Mapping) and item[key] == value.get(key):
            return i
    return -1


def _sort_by(items: list[Any], order: list[Any], key: str | None) -> list[Any]:
    """patch.go normalizeSliceOrder: a stable sort by position in `order`."""
    return sorted(items, key=lambda item: _index(order, item, key))


def _merge_sorted(left: list[Any], right: list[Any], server_order: list[Any], key: str | None) -> list[Any]:
    """patch.go mergeSortedSlice: left = the original's items not in the patch, right = the patch's items."""
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], key)
            ri = _index(server_order, right[j], key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def merge_slice(original: list[Any], patch: list[Any], meta: Field) -> list[Any]:
    """k8s apimachinery strategicpatch patch.go mergeSlice for a `patchStrategy:"merge"` list."""
    if not original and not patch:
        return original
    kinds = {_kind(v) for v in [*original, *patch]}
    if len(kinds) > 1 or "list" in kinds:
        raise ValueError(f"cannot merge a list of mixed or nested types: {sorted(kinds)}")
    if kinds != {"map"}:
        merged = _dedupe_scalars([*original, *patch])
        patch_items = [v for v in merged if v in patch]
        server_only = [v for v in merged if v not in patch]
        return _merge_sorted(_sort_by(server_only, original, None), _sort_by(patch_items, patch, None), original,
                             None)
    key = meta.key
    if not key:
        raise ValueError("cannot merge lists without merge key")
    merged = copy.deepcopy(original)
    for item in patch:
        if key not in item:
            raise ValueError(f"map: {item} does not contain declared merge key: {key}")
        at = _index(merged, item, key)
        if at >= 0:
            merged[at] = merge_map(merged[at], item, meta.schema)
        else:
            merged.append(copy.deepcopy(item))
    patch_items = [v for v in merged if _index(patch, v, key) >= 0]
    server_only = [v for v in merged if _index(patch, v, key) < 0]
    return _merge_sorted(_sort_by(server_only, original, key), _sort_by(patch_items, patch, key), original, key)


def strategic_merge(base: Mapping[str, Any], patch: Mapping[str, Any], schema: Mapping[str, Field]) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/utils/structutils/kube.go StrategicMergePatch: the patch, cleaned of empty
    values, merged onto the base."""
    return merge_map(base, clean_patch(patch), schema)


def build_container(base: Mapping[str, Any], merge: Mapping[str, Any] | None) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/container.go BuildContainer.

    `base` is the container the operator builds; `merge` the user's (e.g. a NodeSet's spec.slurmd). The user's
    args follow the operator's; a user probe replaces the handler (exec/httpGet/tcpSocket/grpc) of the
    operator's probe of the same kind and keeps its thresholds unless set; everything else is a strategic
    merge (env by name, volumeMounts by mountPath, ports by containerPort; the user's name, image, command,
    resources override).
    """
    base = copy.deepcopy(dict(base))
    merge = copy.deepcopy(dict(merge or {}))
    args = [*(base.get("args") or []), *(merge.get("args") or [])]
    if args:
        base["args"] = args
    else:
        base.pop("args", None)
    merge.pop("args", None)
    for probe in _PROBES:
        if merge.get(probe) is not None and base.get(probe) is not None:  # Go: both pointers non-nil
            kept = {k: v for k, v in base[probe].items() if k not in _PROBE_HANDLERS}
            handler = {k: v for k, v in merge[probe].items() if k in _PROBE_HANDLERS}
            base[probe] = {**kept, **handler}
    return strategic_merge(base, merge, CONTAINER)


def build_pod_template(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    base: Mapping[str, Any],
    merge: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """slurm-operator v1.2.1 internal/builder/common/pod_template.go BuildPodTemplate.

    Returns the PodTemplateSpec dict {"metadata": {name, namespace, labels, annotations}, "spec": ...}:
    the user's containers and initContainers are appended after the operator's (not merged by name: a
    same-named one is a duplicate), the rest of the user's pod spec is strategically merged onto the
    operator's (volumes by name, user volumes first; nodeSelector and other maps merged; tolerations,
    dnsConfig.searches, affinity's lists replaced).
    """
    base = copy.deepcopy(dict(base))
    merge = copy.deepcopy(dict(merge or {}))
    for key in ("containers", "initContainers"):
        joined = [*(base.get(key) or []), *(merge.get(key) or [])]
        if joined:
            base[key] = joined
        merge.pop(key, None)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels),
                                "annotations": dict(annotations)}
    return strategic_merge({"metadata": metadata, "spec": base}, {"spec": merge}, POD_TEMPLATE_SPEC)
