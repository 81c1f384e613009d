"""What the operator would run, as small frozen records: pods, their containers, volumes and services.

Each record keeps the full Kubernetes dict it was read from (`raw`, `spec`) next to the fields the twin uses,
so nothing the operator sets is lost. Lists are tuples; maps are plain dicts (do not mutate them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class EnvVar:
    """A container environment variable: a literal `value`, or `value_from` (fieldRef, secretKeyRef, ...)."""

    name: str
    value: str = ""
    value_from: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class VolumeMount:
    name: str
    mount_path: str
    sub_path: str = ""
    read_only: bool = False


@dataclass(frozen=True)
class ContainerPort:
    name: str
    container_port: int
    protocol: str = "TCP"


@dataclass(frozen=True)
class ContainerPlan:
    """One container (or init container) of a pod as the operator builds it, merged with the plan's fields.

    `restart_policy` "Always" on an init container makes it a sidecar (started before the next init container,
    kept running). `pre_stop` is the preStop exec command, if any. `probes` maps startupProbe/readinessProbe/
    livenessProbe to their dicts.
    """

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: tuple[EnvVar, ...]
    volume_mounts: tuple[VolumeMount, ...]
    ports: tuple[ContainerPort, ...]
    pre_stop: tuple[str, ...] | None = None
    restart_policy: str | None = None
    working_dir: str = ""
    resources: Mapping[str, Any] = field(default_factory=dict)
    security_context: Mapping[str, Any] = field(default_factory=dict)
    probes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)

    def env_value(self, name: str) -> str | None:
        """The literal value of env var `name` (None when absent or set from a reference)."""
        for var in self.env:
            if var.name == name:
                return None if var.value_from is not None else var.value
        return None


@dataclass(frozen=True)
class VolumePlan:
    """A pod volume: its name and its source as the Kubernetes dict has it (e.g. {"projected": {...}})."""

    name: str
    source: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """The volume source's type: projected, emptyDir, configMap, secret, persistentVolumeClaim, hostPath..."""
        return next(iter(self.source), "")


@dataclass(frozen=True)
class PodPlan:
    """A pod the operator (or the StatefulSet/Deployment it creates) would run.

    `owner_kind` is "StatefulSet", "Deployment" or "NodeSet"; `owner_name` that object's name. Deployment pods
    are really named `<deployment>-<pod-template-hash>-<random>`; the twin's name for them is
    `<deployment>-<replica>` (see each builder). `generate_name` is set where the operator asks the API server
    to pick the name (a DaemonSet-mode NodeSet pod). `spec` is the whole pod spec dict.
    """

    name: str
    namespace: str
    hostname: str
    subdomain: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    init_containers: tuple[ContainerPlan, ...]
    containers: tuple[ContainerPlan, ...]
    volumes: tuple[VolumePlan, ...]
    dns_searches: tuple[str, ...]
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    security_context: Mapping[str, Any]
    owner_kind: str
    owner_name: str
    spec: Mapping[str, Any]
    generate_name: str = ""

    def container(self, name: str) -> ContainerPlan:
        """The container (or init container) called `name`; KeyError if there is none."""
        for c in (*self.containers, *self.init_containers):
            if c.name == name:
                return c
        raise KeyError(f"pod {self.name or self.generate_name} has no container {name!r}")

    def volume(self, name: str) -> VolumePlan:
        for v in self.volumes:
            if v.name == name:
                return v
        raise KeyError(f"pod {self.name or self.generate_name} has no volume {name!r}")


@dataclass(frozen=True)
class ServicePort:
    name: str
    port: int
    target_port: str | int
    protocol: str = "TCP"
    node_port: int = 0


@dataclass(frozen=True)
class ServicePlan:
    """A Service the operator creates. `headless` is clusterIP None with publishNotReadyAddresses."""

    name: str
    namespace: str
    selector: Mapping[str, str]
    ports: tuple[ServicePort, ...]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    headless: bool
    type: str
    fqdn_short: str
    spec: Mapping[str, Any]


# --- from dicts ----------------------------------------------------------------------------------------------


def container_from_dict(c: Mapping[str, Any]) -> ContainerPlan:
    """A ContainerPlan from a (merged) core/v1 Container dict."""
    pre_stop = (((c.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}).get("command")
    return ContainerPlan(
        name=str(c.get("name") or ""),
        image=str(c.get("image") or ""),
        command=tuple(str(x) for x in c.get("command") or ()),
        args=tuple(str(x) for x in c.get("args") or ()),
        env=tuple(EnvVar(str(e.get("name") or ""), str(e.get("value") or ""), e.get("valueFrom"))
                  for e in c.get("env") or ()),
        volume_mounts=tuple(VolumeMount(str(m.get("name") or ""), str(m.get("mountPath") or ""),
                                        str(m.get("subPath") or ""), bool(m.get("readOnly")))
                            for m in c.get("volumeMounts") or ()),
        ports=tuple(ContainerPort(str(p.get("name") or ""), int(p.get("containerPort") or 0),
                                  str(p.get("protocol") or "TCP")) for p in c.get("ports") or ()),
        pre_stop=tuple(str(x) for x in pre_stop) if pre_stop is not None else None,
        restart_policy=c.get("restartPolicy"),
        working_dir=str(c.get("workingDir") or ""),
        resources=c.get("resources") or {},
        security_context=c.get("securityContext") or {},
        probes={k: c[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if c.get(k) is not None},
        raw=c,
    )


def volume_from_dict(v: Mapping[str, Any]) -> VolumePlan:
    return VolumePlan(str(v.get("name") or ""), {k: val for k, val in v.items() if k != "name"})


def pod_from_spec(
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    spec: Mapping[str, Any],
    owner_kind: str,
    owner_name: str,
    generate_name: str = "",
) -> PodPlan:
    """A PodPlan from a final pod spec dict and its metadata."""
    return PodPlan(
        name=name,
        namespace=namespace,
        hostname=str(spec.get("hostname") or ""),
        subdomain=str(spec.get("subdomain") or ""),
        labels=dict(labels),
        annotations=dict(annotations),
        init_containers=tuple(container_from_dict(c) for c in spec.get("initContainers") or ()),
        containers=tuple(container_from_dict(c) for c in spec.get("containers") or ()),
        volumes=tuple(volume_from_dict(v) for v in spec.get("volumes") or ()),
        dns_searches=tuple(str(s) for s in (spec.get("dnsConfig") or {}).get("searches") or ()),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerations=tuple(spec.get("tolerations") or ()),
        security_context=spec.get("securityContext") or {},
        owner_kind=owner_kind,
        owner_name=owner_name,
        spec=spec,
        generate_name=generate_name,
    )


def service_from_dict(svc: Mapping[str, Any]) -> ServicePlan:
    """A ServicePlan from a core/v1 Service dict (metadata, spec)."""
    meta = svc.get("metadata") or {}
    spec = svc.get("spec") or {}
    return ServicePlan(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        selector=dict(spec.get("selector") or {}),
        ports=tuple(ServicePort(str(p.get("name") or ""), int(p.get("port") or 0), p.get("targetPort") or 0,
                                str(p.get("protocol") or "TCP"), int(p.get("nodePort") or 0))
                    for p in spec.get("ports") or ()),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        headless=spec.get("clusterIP") == "None",
        type=str(spec.get("type") or "ClusterIP"),
        fqdn_short=f"{meta.get('name')}.{meta.get('namespace')}",
        spec=spec,
    )
