"""KEDA, the HPA, Slinky's NodeSet controller and Karpenter as the twin runs them (scripts/twin/scaling.py), on prod's
gpu-h100 ScaledObject and a clock the test moves: from zero to the job's nodes after the launch delay, scale-up
bounded by the HPA's policy, scale-down only after the stabilization window, to zero after the cooldown, and a
condemned pod drained before it is deleted."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.twin.scaling import DRAIN_REASON, HPA_SYNC_S, Clock, Controllers, hpa_recommendation, hpa_scale_up_limit
from tests.plan.fixtures import shipped_plan

PARTITION = "gpu-h100"


def scaled_object() -> dict[str, Any]:
    (found,) = [o for o in shipped_plan("prod").manifests()
                if o["kind"] == "ScaledObject" and o["spec"]["scaleTargetRef"]["name"] == PARTITION]
    return found


class Cluster:
    """The twin's side: Prometheus's answer, the pods, Slurm's node states, what was asked of each."""

    def __init__(self) -> None:
        self.value = 0.0
        self.alive: set[str] = set()
        self.states: dict[str, str] = {}
        self.commands: list[str] = []
        self.removed: list[str] = []

    def query(self, _promql: str) -> float:
        return self.value

    def start_scaled_node(self, nodeset: str, ordinal: int) -> str:
        name = f"{nodeset}-{ordinal}"
        self.alive.add(name)
        self.states[name] = "idle"
        return name

    def admin(self, command: str) -> str:
        self.commands.append(command)
        if command.startswith("sinfo"):
            return self.states.get(command.split(" -n ")[1].split()[0], "") + "\n"
        return ""

    def remove_node_pod(self, name: str) -> None:
        self.removed.append(name)
        self.alive.discard(name)

    def pod_alive(self, name: str) -> bool:
        return name in self.alive

    def restart_node(self, name: str) -> object:
        self.alive.add(name)
        return name


@pytest.fixture
def world() -> tuple[Controllers, Cluster, Clock]:
    cluster, clock = Cluster(), Clock()
    return Controllers([scaled_object()], "slurm", cluster, launch_delay_s=20, clock=clock), cluster, clock


def run(controllers: Controllers, clock: Clock, seconds: float) -> None:
    for _ in range(int(seconds)):
        controllers.tick()
        clock.advance(1)


def test_the_hpa_rules() -> None:
    assert hpa_recommendation(0, 1, 0, 8) == 1  # the HPA never asks for fewer than one: KEDA owns zero
    assert hpa_recommendation(13, 1, 0, 8) == 8
    assert [hpa_scale_up_limit(n) for n in (1, 4, 10)] == [5, 8, 20]


def test_from_zero_to_the_jobs_nodes_after_the_launch_delay(world: tuple[Controllers, Cluster, Clock]) -> None:
    controllers, cluster, clock = world
    run(controllers, clock, 60)
    assert controllers.replicas(PARTITION) == 0 and not controllers.events
    cluster.value = 2  # a 2-node job pends
    run(controllers, clock, 60)
    whats = [e.what for e in controllers.events]
    assert whats[:2] == ["keda-activate", "hpa-scale-up"] and controllers.replicas(PARTITION) == 2
    pending = [e.at for e in controllers.events if e.what == "pod-pending"]
    ready = [e.at for e in controllers.events if e.what == "node-ready"]
    assert len(pending) == 2 and all(r - p >= 20 for p, r in zip(pending, ready, strict=True))
    assert controllers.running(PARTITION) == ["gpu-h100-0", "gpu-h100-1"]


def test_scale_down_waits_for_the_window_and_drains_first(world: tuple[Controllers, Cluster, Clock]) -> None:
    controllers, cluster, clock = world
    cluster.value = 2
    run(controllers, clock, 90)
    cluster.value = 1  # one node's job ended
    window = controllers.sets[PARTITION].window_s
    run(controllers, clock, window - 2 * HPA_SYNC_S)
    assert controllers.replicas(PARTITION) == 2  # the window's highest recommendation is still 2
    cluster.states["gpu-h100-1"] = "allocated"  # a job still runs there
    run(controllers, clock, 3 * HPA_SYNC_S)
    assert controllers.replicas(PARTITION) == 1
    drain = DRAIN_REASON.format(namespace="slurm", pod="gpu-h100-1")
    assert f"scontrol update nodename=gpu-h100-1 state=drain reason='{drain}'" in cluster.commands
    assert cluster.removed == []  # not while its job runs
    cluster.states["gpu-h100-1"] = "drained"
    run(controllers, clock, 2)
    assert cluster.removed == ["gpu-h100-1"] and controllers.running(PARTITION) == ["gpu-h100-0"]


def test_to_zero_after_the_cooldown_and_a_dead_pod_made_again(world: tuple[Controllers, Cluster, Clock]) -> None:
    controllers, cluster, clock = world
    cluster.value = 1
    run(controllers, clock, 60)
    cluster.alive.discard("gpu-h100-0")  # deleted, evicted: the NodeSet controller makes it again
    run(controllers, clock, 2)
    assert "pod-recreated" in [e.what for e in controllers.events] and "gpu-h100-0" in cluster.alive
    cluster.value = 0
    run(controllers, clock, controllers.sets[PARTITION].cooldown_s - 60)
    assert controllers.replicas(PARTITION) == 1
    clock.advance(120)  # the idle time passes (the twin's clock, moved on)
    run(controllers, clock, 35)
    assert controllers.replicas(PARTITION) == 0 and "keda-to-zero" in [e.what for e in controllers.events]
    cluster.states["gpu-h100-0"] = "drained"
    run(controllers, clock, 2)
    assert cluster.removed == ["gpu-h100-0"]


def test_a_one_sync_spike_scales_nothing_and_a_lasting_demand_scales_after_the_window(
        world: tuple[Controllers, Cluster, Clock]) -> None:
    """The query doubles for a sync when a job starts (Slurm's busy nodes and the demand series' wanted ones
    overlap): the scale-up window's lowest recommendation keeps the replicas; a demand that lasts wins after it."""
    controllers, cluster, clock = world
    cluster.value = 2
    run(controllers, clock, 60)
    assert controllers.replicas(PARTITION) == 2
    cluster.value = 4  # one poll and one sync see the overlap
    run(controllers, clock, 31)
    cluster.value = 2
    run(controllers, clock, 120)
    assert controllers.replicas(PARTITION) == 2, [e.what for e in controllers.events]
    cluster.value = 4  # a second 2-node job: it lasts
    window = controllers.sets[PARTITION].up_window_s
    assert window == 60
    run(controllers, clock, window - HPA_SYNC_S)
    assert controllers.replicas(PARTITION) == 2
    run(controllers, clock, 2 * HPA_SYNC_S + 30)
    assert controllers.replicas(PARTITION) == 4
