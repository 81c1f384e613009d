"""The kubelet's probe rules (scripts/twin/kubelet.py) with the operator's slurmd probes, on a clock the test moves:
a slurmd that does not answer /livez within 6 x 10 s of starting is restarted, one that stops answering later is
restarted after 6 more failures, and a failing readiness probe only marks the pod not ready."""

from __future__ import annotations

from typing import Any

from scripts.twin.kubelet import Kubelet, ProbeState
from tests.twin.operator_plan import nodeset_pods


def slurmd_probes() -> dict[str, Any]:
    """The probes of prod's gpu-h100 slurmd container, as the operator builds them."""
    slurmd = nodeset_pods("prod")["gpu-h100"].containers[0]
    return {"probes": slurmd.probes, "ports": {p.name: p.container_port for p in slurmd.ports}}


class Node:
    """A slurmd that answers each path or not, and a clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self.answers = {"/livez": False, "/readyz": False}
        self.asked: list[tuple[int, str]] = []
        self.restarted: list[str] = []
        self.kubelet = Kubelet(self.restarted.append, lambda: self.now, self.get)
        slurmd = slurmd_probes()
        self.state = ProbeState("gpu-h100-0", "10.0.0.5", "ns", slurmd["probes"], slurmd["ports"], 0.0)
        self.kubelet.watch(self.state)

    def get(self, _netns: str, _address: str, port: int, path: str, _timeout: float) -> bool:
        self.asked.append((port, path))
        return self.answers[path]

    def run_until(self, seconds: float) -> None:
        while self.now < seconds:
            self.kubelet.tick()
            self.now += 1


def test_the_operators_probes_are_what_the_kubelet_runs() -> None:
    node = Node()
    node.answers.update({"/livez": True, "/readyz": True})
    node.run_until(25)
    assert set(node.asked) == {(6818, "/livez"), (6818, "/readyz")} and node.state.ready and not node.restarted


def test_a_slurmd_slower_to_start_than_six_tries_is_restarted() -> None:
    node = Node()
    node.run_until(50)
    assert not node.restarted  # 5 failures (t = 0, 10, 20, 30, 40)
    node.run_until(51)
    assert node.restarted == ["gpu-h100-0"]
    assert "startupProbe failed 6 times in a row (failureThreshold 6, every 10 s)" in node.kubelet.restarts[0].reason
    assert all(path == "/livez" for _port, path in node.asked)  # nothing else runs before startup succeeds


def test_one_that_starts_in_time_is_not_restarted() -> None:
    node = Node()
    node.run_until(45)
    node.answers["/livez"] = True
    node.run_until(200)
    assert not node.restarted and node.state.started


def test_a_slurmd_that_stops_answering_is_restarted_by_the_liveness_probe() -> None:
    node = Node()
    node.answers.update({"/livez": True, "/readyz": True})
    node.run_until(30)
    node.answers["/livez"] = False
    node.run_until(81)
    assert not node.restarted  # 5 failures (t = 31, 41, 51, 61, 71: liveness starts the second after startup)
    node.run_until(82)
    assert node.restarted == ["gpu-h100-0"] and "livenessProbe failed 6 times" in node.kubelet.restarts[0].reason


def test_readiness_marks_not_ready_and_restarts_nothing() -> None:
    node = Node()
    node.answers.update({"/livez": True, "/readyz": True})
    node.run_until(20)
    assert node.state.ready
    node.answers["/readyz"] = False
    node.run_until(200)
    assert not node.state.ready and not node.restarted
