"""The replacement history: which nodes the controller had Karpenter replace, and when.

Kept as JSON under one key of a ConfigMap, so a restarted (or a second) controller sees the same history and
the per-partition hourly bound holds across restarts. Writes carry the resourceVersion read with the history:
if another controller wrote in between, the API server refuses the write (409) and this pass replaces nothing.

The ConfigMap calls go through slurm/agent/kube.py (the official `kubernetes` client).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from slurm.agent.kube import Conflict, Kube

KEY = "replacements.json"
KEEP_SECONDS = 24 * 3600


@dataclass(frozen=True)
class Entry:
    partition: str
    node: str
    check: str
    nodeclaim: str
    time: float  # Unix seconds


class LedgerConflict(RuntimeError):
    """Another writer changed the ledger since it was loaded: reload before acting."""


def prune(entries: Iterable[Entry], now: float, keep: float = KEEP_SECONDS) -> list[Entry]:
    return sorted((e for e in entries if now - e.time < keep), key=lambda e: (e.time, e.node))


def to_data(entries: Iterable[Entry]) -> dict[str, str]:
    return {KEY: json.dumps([asdict(e) for e in entries], sort_keys=True)}


def from_data(data: Mapping[str, str] | None) -> list[Entry]:
    raw = json.loads((data or {}).get(KEY) or "[]")
    return [Entry(str(r["partition"]), str(r["node"]), str(r["check"]), str(r["nodeclaim"]), float(r["time"]))
            for r in raw]


class LedgerStore(Protocol):
    def load(self) -> list[Entry]: ...

    def record(self, entry: Entry, now: float) -> None: ...


class ConfigMapLedger:
    def __init__(self, kube: Kube, name: str = "slurm-eks-repair-ledger", namespace: str = "slurm") -> None:
        self.kube, self.name, self.namespace = kube, name, namespace
        self._entries: list[Entry] = []
        self._version: str | None = None  # None: the ConfigMap did not exist at load

    def load(self) -> list[Entry]:
        configmap = self.kube.get_configmap(self.name, self.namespace)
        self._version = configmap["metadata"].get("resourceVersion") if configmap else None
        self._entries = from_data(configmap.get("data") if configmap else None)
        return list(self._entries)

    def record(self, entry: Entry, now: float) -> None:
        entries = prune([*self._entries, entry], now)
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace,
                                "labels": {"app.kubernetes.io/name": "slurm-eks-repair"}}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": to_data(entries)}
        try:
            if self._version is None:
                saved = self.kube.create_configmap(body)
            else:
                meta["resourceVersion"] = self._version
                saved = self.kube.replace_configmap(body)
        except Conflict as exc:
            raise LedgerConflict(str(exc)) from None
        self._version, self._entries = saved["metadata"].get("resourceVersion"), entries
