"""Last on each stack's twin (after zflows: the idle time it moves on empties every partition, and whatever test came
after would start from zero again): idle nodes drain and go through Slinky's path once the idle time has passed."""

from __future__ import annotations

import time

import pytest

from scripts.twin.cluster import Twin
from tests.twin.conftest import USERS
from tests.twin.researcher import START_BOUND_S, Researcher, admin, wait_for
from tests.twin.test_journey_autoscaling import expect_replicas

pytestmark = [pytest.mark.twin]


def test_idle_nodes_drain_and_go_after_the_idle_time(stack_twin: tuple[str, Twin]) -> None:
    """A partition with nodes and no job: once its idle time has passed (the twin's clock moved on by the
    ScaledObject's cooldownPeriod), KEDA scales it to zero and Slinky's path drains each node, deletes its pod and
    its Slurm node record."""
    stack, twin = stack_twin
    assert twin.controllers is not None
    person = Researcher(twin, USERS[stack], stack)
    partition = twin.nodesets[0]["metadata"]["name"]
    job = person.sbatch("--wrap=true", partition, f"--partition={partition}", "--nodes=1", "--time=5",
                        "--output=/dev/null")
    wait_for(twin, job, ("COMPLETED",), START_BOUND_S)
    nodes = twin.controllers.running(partition)
    assert nodes, f"{stack}/{partition}: no node ran {job.where}"
    expect_replicas(twin, stack, partition, 0, "every job is done")
    twin.clock.advance(twin.controllers.sets[partition].cooldown_s)
    deadline = time.monotonic() + 120
    while twin.controllers.running(partition) and time.monotonic() < deadline:
        time.sleep(2)
    steps = [(e.what, e.detail) for e in twin.controllers.events if e.nodeset == partition]
    assert not twin.controllers.running(partition), f"{stack}/{partition}: nodes still up after the idle time: {steps}"
    for node in nodes:
        assert steps.index(("drain", node)) < steps.index(("pod-deleted", node)), f"{node} not drained first: {steps}"
    left = admin(twin, f"sinfo -h -N -p {partition} -o %N").stdout.split()
    assert not set(nodes) & set(left), f"{stack}/{partition}: Slurm still lists {left}"
