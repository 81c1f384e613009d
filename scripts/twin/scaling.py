"""The controllers that bring a partition's nodes on EKS, acting on the twin as they act there: KEDA and the HPA set
each NodeSet's replicas from its ScaledObject's query, Slinky's NodeSet controller makes or condemns pods, and
Karpenter brings a node for each new pod after a launch delay. The NodeSets start at the plan's replicas (0).

- KEDA (keda.sh/docs/latest/reference/scaledobject-spec: pollingInterval default 30 s, cooldownPeriod default
  300 s; keda.sh/docs/concepts/scaling-deployments: KEDA activates a target at zero when its trigger is active and
  scales it back to zero, the HPA doing everything between): every `pollingInterval` it asks the scaler; a value
  above the activation threshold (0) is activity. With no replica it scales the target to 1 on activity; with
  `minReplicaCount: 0` it scales to 0 once `cooldownPeriod` has passed since the last activity.
- The HPA (kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale, "Algorithm details", "Default
  Behavior"): every 15 s (kube-controller-manager --horizontal-pod-autoscaler-sync-period), on the value KEDA's
  metrics server answers from the scaler then (keda.sh/docs/concepts/scaling-deployments), replicas = ceil(value /
  target) for an AverageValue metric, within [max(min, 1), max]; up to the lowest recommendation of the scale-up
  stabilization window, by at most max(4 pods, 100%) a sync; down to the highest of the scale-down window (both
  windows the ScaledObject's).
- Slinky's NodeSet controller (slurm-operator v1.2.1 internal/controller/nodeset/nodeset_sync.go): pods
  `<nodeset>-<ordinal>` for the replicas; on scale-in it drains the Slurm node of a condemned pod
  (`processCondemned`, the reason of slurmcontrol.go FormatNodeReason), deletes the pod only once the node is
  drained (its preStop marks it down) and then deletes the node record (slurmcontrol.go DeleteNode).
- Karpenter: an unschedulable pod gets a NodeClaim; after `launch_delay_s` (batching, EC2's launch, the kubelet
  joining) the node is Ready and the pod binds there, one pod a node (the NodeSet's pod anti-affinity).

Time is the twin's clock (`Clock`): a test can move it on to see an idle timeout pass without waiting for it.
Every step is recorded as an Event, so a test can report where the time from sbatch to a first step went.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scripts.twin.errors import TwinError

HPA_SYNC_S = 15.0
# Karpenter's own part of a launch: pods are batched until 1 s passes with no new one, at most 10 s
# (karpenter.sh/docs/reference/settings: BATCH_IDLE_DURATION, BATCH_MAX_DURATION defaults). EC2's launch, the
# AMI's boot and the kubelet's join come on top: minutes for a GPU instance, which no source we could cite puts a
# number on (measure yours). The twin waits BATCH_MAX_DURATION by default; `launch_delay_s` sets another figure.
KARPENTER_BATCH_MAX_S = 10.0
TWIN_LAUNCH_DELAY_S = KARPENTER_BATCH_MAX_S
HPA_UP_PODS, HPA_UP_PERCENT = 4, 100
KEDA_POLLING_DEFAULT_S, KEDA_COOLDOWN_DEFAULT_S = 30, 300  # KEDA's ScaledObject defaults
# The operator's drain reason for a condemned pod (slurm-operator v1.2.1 nodeset_sync.go processCondemned with
# slurmcontrol.go FormatNodeReason), and the preStop's (worker_app.go).
DRAIN_REASON = "slurm-operator: Pod ({namespace}/{pod}) is pending termination for scale-in"
# sinfo's %T of a node drained with no job left ("draining" while a job runs: sinfo(1) NODE STATE CODES), or one
# already down or gone.
DRAINED_STATES = ("drained", "down", "")


class Clock:
    """Monotonic seconds, plus whatever a test has moved it on by."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass(frozen=True)
class Event:
    at: float  # the twin's clock
    nodeset: str
    what: str  # keda-activate, hpa-scale, keda-to-zero, pod-pending, node-ready, pod-started, drain, pod-deleted
    detail: str = ""


def hpa_recommendation(value: float, threshold: float, low: int, high: int) -> int:
    """replicas = ceil(value / target), within [max(min, 1), max]: the HPA acts only on a scaled-up target."""
    return max(max(low, 1), min(high, math.ceil(value / threshold)))


def hpa_scale_up_limit(current: int) -> int:
    """The default scale-up policies: the larger of +4 pods and +100% a period."""
    return max(current + HPA_UP_PODS, current * (100 + HPA_UP_PERCENT) // 100)


@dataclass
class ScaledNodeSet:
    """One NodeSet's scaling state."""

    name: str
    query: str
    threshold: float
    low: int
    high: int
    polling_s: float
    cooldown_s: float
    window_s: float
    replicas: int
    up_window_s: float = 0.0
    value: float = 0.0
    last_active: float | None = None
    next_poll: float = 0.0
    next_sync: float = 0.0
    recommendations: list[tuple[float, int]] = field(default_factory=list)

    @classmethod
    def of(cls, scaled_object: Mapping[str, Any], replicas: int) -> ScaledNodeSet:
        spec = scaled_object["spec"]
        (trigger,) = [t for t in spec["triggers"] if t["type"] == "prometheus"]
        behaviors = ((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior") or {}
        down, up = behaviors.get("scaleDown") or {}, behaviors.get("scaleUp") or {}
        return cls(spec["scaleTargetRef"]["name"], trigger["metadata"]["query"],
                   float(trigger["metadata"]["threshold"]), int(spec.get("minReplicaCount", 0)),
                   int(spec.get("maxReplicaCount", 100)), float(spec.get("pollingInterval", KEDA_POLLING_DEFAULT_S)),
                   float(spec.get("cooldownPeriod", KEDA_COOLDOWN_DEFAULT_S)),
                   float(down.get("stabilizationWindowSeconds", 300)), replicas,
                   up_window_s=float(up.get("stabilizationWindowSeconds", 0)))

    def keda(self, value: float, now: float) -> str | None:
        """KEDA's poll: activation from 0, or to 0 after the cooldown. Returns what it did."""
        self.value = value
        if value > 0:
            self.last_active = now
            if self.replicas == 0:
                self.replicas = 1
                return "keda-activate"
        elif (self.replicas > 0 and self.low == 0 and self.last_active is not None
              and now - self.last_active >= self.cooldown_s):
            self.replicas = 0
            self.recommendations.clear()
            return "keda-to-zero"
        return None

    def hpa(self, value: float, now: float) -> str | None:
        """The HPA's sync on the value KEDA's metrics server answers it (the scaler asked at each request)."""
        if self.replicas == 0:
            return None
        self.value = value
        wanted = hpa_recommendation(value, self.threshold, self.low, self.high)
        kept = max(self.window_s, self.up_window_s)
        self.recommendations = [(t, n) for t, n in self.recommendations if now - t < kept]
        self.recommendations.append((now, wanted))
        lowest = min(n for t, n in self.recommendations if now - t < self.up_window_s or t == now)
        if lowest > self.replicas:  # up: the lowest recommendation of the scale-up window
            self.replicas = min(lowest, hpa_scale_up_limit(self.replicas))
            return "hpa-scale-up"
        stabilized = max(n for t, n in self.recommendations if now - t < self.window_s)
        if stabilized < self.replicas:
            self.replicas = stabilized
            return "hpa-scale-down"
        return None


class Cluster(Protocol):
    """What the controllers do through the twin."""

    def query(self, promql: str) -> float: ...  # Prometheus, as KEDA asks it

    def start_scaled_node(self, nodeset: str, ordinal: int) -> str: ...  # a pod on a node Karpenter made

    def admin(self, command: str) -> str: ...  # a Slurm command on the controller, its output

    def remove_node_pod(self, name: str) -> None: ...  # the pod deleted as Kubernetes does, its node record gone

    def pod_alive(self, name: str) -> bool: ...

    def restart_node(self, name: str) -> object: ...  # the pod made again under its name, on its node


class Controllers:
    """KEDA, the HPA, Slinky's NodeSet controller and Karpenter for every NodeSet with a ScaledObject."""

    def __init__(self, scaled_objects: list[Mapping[str, Any]], namespace: str, twin: Cluster,
                 launch_delay_s: float, clock: Clock | None = None) -> None:
        self.clock = clock or Clock()
        self.namespace = namespace
        self.twin = twin
        self.launch_delay_s = launch_delay_s
        self.sets = {s.name: s for s in (ScaledNodeSet.of(o, 0) for o in scaled_objects)}
        self.pods: dict[str, dict[int, str]] = {name: {} for name in self.sets}  # running pods by ordinal
        self.launching: dict[tuple[str, int], float] = {}  # (nodeset, ordinal) -> when its node is ready
        self.condemned: set[str] = set()
        self.events: list[Event] = []
        self.errors: list[str] = []
        self.lock = threading.RLock()

    def record(self, nodeset: str, what: str, detail: str = "") -> None:
        self.events.append(Event(self.clock(), nodeset, what, detail))

    def tick(self) -> None:
        """One pass of every controller (the twin's platform loop calls it every second)."""
        with self.lock:
            now = self.clock()
            for scaled in self.sets.values():
                if now >= scaled.next_poll:
                    scaled.next_poll = now + scaled.polling_s
                    self._act(scaled, scaled.keda, now)  # KEDA's poll: activation and cooldown
                if now >= scaled.next_sync and scaled.replicas > 0:
                    scaled.next_sync = now + HPA_SYNC_S
                    self._act(scaled, scaled.hpa, now)  # the HPA's sync
                self.reconcile(scaled, now)

    def _act(self, scaled: ScaledNodeSet, step: Callable[[float, float], str | None], now: float) -> None:
        """`step(value, now)` on the query's value now; a failed query keeps the replicas (KEDA and the HPA log
        it and wait for the next try)."""
        try:
            value = self.twin.query(scaled.query)
        except TwinError as error:
            self.errors.append(f"{scaled.name}: {error}")
            return
        done = step(value, now)
        if done:
            self.record(scaled.name, done, f"query {value:g}, replicas {scaled.replicas}")

    def reconcile(self, scaled: ScaledNodeSet, now: float) -> None:
        """Slinky's NodeSet controller with Karpenter under it: pods up to the replicas, condemned ones drained
        and then deleted."""
        pods = self.pods[scaled.name]
        for ordinal in range(scaled.replicas):
            key = (scaled.name, ordinal)
            if ordinal in pods:
                if pods[ordinal] not in self.condemned and not self.twin.pod_alive(pods[ordinal]):
                    # A pod that went (deleted, evicted): the NodeSet controller makes it again, on the node that
                    # is still there, so no launch.
                    self.twin.restart_node(pods[ordinal])
                    self.record(scaled.name, "pod-recreated", pods[ordinal])
                elif pods[ordinal] in self.condemned:  # wanted again before it went: the operator undrains it
                    self.condemned.discard(pods[ordinal])
                    self.twin.admin(f"scontrol update nodename={pods[ordinal]} state=undrain")
                    self.record(scaled.name, "undrain", pods[ordinal])
                continue
            if key not in self.launching:
                self.launching[key] = now + self.launch_delay_s
                self.record(scaled.name, "pod-pending", f"ordinal {ordinal}: Karpenter launches a node")
            elif now >= self.launching[key]:
                del self.launching[key]
                self.record(scaled.name, "node-ready", f"ordinal {ordinal}")
                pods[ordinal] = self.twin.start_scaled_node(scaled.name, ordinal)
                self.record(scaled.name, "pod-started", pods[ordinal])
        for key in [k for k in self.launching if k[0] == scaled.name and k[1] >= scaled.replicas]:
            del self.launching[key]  # no longer wanted: Karpenter's NodeClaim goes with the pod
        for ordinal in sorted((o for o in pods if o >= scaled.replicas), reverse=True):
            name = pods[ordinal]
            if name not in self.condemned:
                reason = DRAIN_REASON.format(namespace=self.namespace, pod=name)
                self.twin.admin(f"scontrol update nodename={name} state=drain reason='{reason}'")
                self.condemned.add(name)
                self.record(scaled.name, "drain", name)
            elif self.drained(name):
                self.twin.remove_node_pod(name)
                self.condemned.discard(name)
                del pods[ordinal]
                self.record(scaled.name, "pod-deleted", name)

    def drained(self, node: str) -> bool:
        state = self.twin.admin(f"sinfo -h -N -n {node} -o %T").strip().rstrip("*~#!%$@^-")
        return state in DRAINED_STATES

    def replicas(self, nodeset: str) -> int:
        return self.sets[nodeset].replicas

    def running(self, nodeset: str) -> list[str]:
        return [self.pods[nodeset][o] for o in sorted(self.pods[nodeset])]
