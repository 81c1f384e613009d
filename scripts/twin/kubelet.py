"""The kubelet's probes of the twin's slurmd pods, with the thresholds the operator gives them.

kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes: an httpGet probe
succeeds on a status from 200 to 399, within timeoutSeconds (default 1); it runs every periodSeconds (default 10)
after initialDelaySeconds (default 0). While a startup probe has not succeeded, no other probe runs; after
failureThreshold (default 3) failures in a row of the startup or the liveness probe the kubelet kills the
container and restarts it; a readiness probe's failures only mark the pod not ready. slurm-operator v1.2.1 gives
slurmd a startup and a liveness probe on GET /livez and a readiness probe on GET /readyz, port 6818, the first two
with failureThreshold 6 and periodSeconds 10 (worker_app.go; scripts/twin/operator/worker.py), which Slurm 25.11
answers (src/slurmd/slurmd/http.c).

The twin restarts the pod where the kubelet restarts its container: a slurmd pod's other container is the
`logfile` sidecar, which the twin does not run. Readiness is recorded (`ProbeState.ready`) and changes no address:
the slurmd pods' headless Service publishes not-ready addresses (slurm-operator v1.2.1, as ported in
scripts/twin/operator/services.py), so on EKS too a not-ready slurmd keeps its DNS name.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3,
            "successThreshold": 1}


@dataclass
class ProbeState:
    """One container's probes and where they stand."""

    pod: str
    address: str
    netns: str
    probes: Mapping[str, Mapping[str, Any]]  # startupProbe, livenessProbe, readinessProbe
    ports: Mapping[str, int]
    started_at: float
    started: bool = False  # the startup probe has succeeded (or there is none)
    ready: bool = False
    failures: dict[str, int] = field(default_factory=dict)
    next_at: dict[str, float] = field(default_factory=dict)

    def setting(self, probe: str, key: str) -> float:
        return float(self.probes[probe].get(key, DEFAULTS[key]))


def http_get(netns: str, address: str, port: int, path: str, timeout_s: float) -> bool:
    """The kubelet's httpGet: any status 200-399 within the timeout."""
    result = subprocess.run(["ip", "netns", "exec", netns, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                             "--max-time", f"{timeout_s:g}", f"http://{address}:{port}{path}"],
                            capture_output=True, text=True, timeout=timeout_s + 5)
    return result.stdout.strip().isdigit() and 200 <= int(result.stdout) < 400


Get = Callable[[str, str, int, str, float], bool]


@dataclass(frozen=True)
class Restart:
    pod: str
    at: float
    reason: str


class Kubelet:
    """Runs the probes of the pods it watches; restarts a pod whose startup or liveness probe fails too often."""

    def __init__(self, restart: Callable[[str], None], clock: Callable[[], float], get: Get = http_get) -> None:
        self.restart = restart
        self.clock = clock
        self.get = get
        self.watched: dict[str, ProbeState] = {}
        self.restarts: list[Restart] = []
        self.lock = threading.RLock()

    def watch(self, state: ProbeState) -> None:
        with self.lock:
            self.watched[state.pod] = state

    def forget(self, pod: str) -> None:
        with self.lock:
            self.watched.pop(pod, None)

    def tick(self) -> None:
        for state in list(self.watched.values()):
            self._probe(state, self.clock())

    def _due(self, state: ProbeState, probe: str, now: float) -> bool:
        if probe not in state.probes:
            return False
        due = state.next_at.get(probe, state.started_at + state.setting(probe, "initialDelaySeconds"))
        if now < due:
            return False
        state.next_at[probe] = now + state.setting(probe, "periodSeconds")
        return True

    def _check(self, state: ProbeState, probe: str) -> bool:
        action = state.probes[probe]["httpGet"]
        port = action["port"]
        number = int(port) if isinstance(port, int) or str(port).isdigit() else int(state.ports[str(port)])
        timeout = state.setting(probe, "timeoutSeconds")
        ok = self.get(state.netns, state.address, number, action.get("path", "/"), timeout)
        state.failures[probe] = 0 if ok else state.failures.get(probe, 0) + 1
        return ok

    def _probe(self, state: ProbeState, now: float) -> None:
        if not state.started:
            if "startupProbe" not in state.probes:
                state.started = True
            elif self._due(state, "startupProbe", now):
                if self._check(state, "startupProbe"):
                    state.started = True
                elif state.failures["startupProbe"] >= state.setting("startupProbe", "failureThreshold"):
                    self._restart(state, now, "startupProbe")
                return
            else:
                return
        if self._due(state, "livenessProbe", now) and not self._check(state, "livenessProbe") and (
                state.failures["livenessProbe"] >= state.setting("livenessProbe", "failureThreshold")):
            self._restart(state, now, "livenessProbe")
            return
        if self._due(state, "readinessProbe", now):
            state.ready = self._check(state, "readinessProbe") or (
                state.ready and state.failures["readinessProbe"] < state.setting("readinessProbe", "failureThreshold"))

    def _restart(self, state: ProbeState, now: float, probe: str) -> None:
        reason = (f"{probe} failed {state.failures[probe]} times in a row "
                  f"(failureThreshold {state.setting(probe, 'failureThreshold'):g}, every "
                  f"{state.setting(probe, 'periodSeconds'):g} s)")
        self.restarts.append(Restart(state.pod, now, reason))
        self.forget(state.pod)
        self.restart(state.pod)
