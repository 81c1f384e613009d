"""Autoscaling measured on the twin's real metrics: each partition's ScaledObject query, evaluated as KEDA and the
HPA would (scripts/twin/autoscaling.py) against Prometheus scraping the twin's slurmctld (Slurm 25.11
openmetrics) and the lifecycle controller's demand metric. A runnable pending job asks for its nodes; held,
QoS-capped, dependency-waiting, later-starting and other-partition jobs ask for none; running jobs keep theirs."""

from __future__ import annotations

import time

import pytest

from scripts.twin.autoscaling import desired_replicas
from scripts.twin.cluster import Twin
from slurm.agent.health.demand import WAITING_FOR_NODES
from tests.twin.conftest import USERS
from tests.twin.researcher import START_BOUND_S, Job, Researcher, admin, job_state, wait_for

pytestmark = [pytest.mark.twin]

SETTLE_S = 90  # the demand thread counts every 15 s, Prometheus scrapes every 3 s


def expect_replicas(twin: Twin, stack: str, partition: str, nodes: int, why: str) -> None:
    """The query says the partition needs `nodes`, and KEDA sets that many replicas within min/maxNodes."""
    deadline = time.monotonic() + SETTLE_S
    value, replicas = twin.keda_replicas(partition)
    while value != nodes and time.monotonic() < deadline:
        time.sleep(2)
        value, replicas = twin.keda_replicas(partition)
    scaled = next(o for o in twin.objects["ScaledObject"].values() if o["spec"]["scaleTargetRef"]["name"] == partition)
    assert (value, replicas) == (nodes, desired_replicas(scaled, nodes)), (
        f"{stack}/{partition}: {why}: the query asks for {value:g} nodes (KEDA would set {replicas} replicas), "
        f"not {nodes}")


def sleeper(person: Researcher, partition: str, nodes: int, *options: str) -> Job:
    return person.sbatch("--wrap=sleep 600", partition, f"--partition={partition}", f"--nodes={nodes}",
                         "--time=20", "--output=/dev/null", *options)


def test_only_jobs_that_could_run_ask_for_nodes(stack_twin: tuple[str, Twin]) -> None:
    stack, twin = stack_twin
    person = Researcher(twin, USERS[stack], stack)
    partition, *others = [ns["metadata"]["name"] for ns in twin.nodesets]
    try:
        check_demand(twin, stack, person, partition, others)
    finally:  # the next tests need the nodes
        admin(twin, f"scancel --user={person.user}", timeout=30)


def check_demand(twin: Twin, stack: str, person: Researcher, partition: str, others: list[str]) -> None:
    expect_replicas(twin, stack, partition, 0, "no job at all")
    # The running job takes every node up (earlier tests may have left more than 2), and the waiting one asks for
    # more than the partition can ever have beside it (maxNodes), so it cannot start on a node that comes meanwhile.
    assert twin.controllers is not None
    scaled = next(o for o in twin.objects["ScaledObject"].values() if o["spec"]["scaleTargetRef"]["name"] == partition)
    busy = max(2, len(twin.controllers.running(partition)))
    wide = int(scaled["spec"]["maxReplicaCount"]) - busy + 1
    running = sleeper(person, partition, busy)
    wait_for(twin, running, ("RUNNING",), START_BOUND_S)
    expect_replicas(twin, stack, partition, busy, f"{running.where} runs on {busy} nodes")
    waiting = sleeper(person, partition, wide)
    deadline = time.monotonic() + 30
    while job_state(twin, waiting)[1] not in WAITING_FOR_NODES and time.monotonic() < deadline:
        time.sleep(1)
    state, reason, _nodes = job_state(twin, waiting)
    assert state == "PENDING" and reason in WAITING_FOR_NODES, f"{waiting.where}: {state} ({reason})"
    expect_replicas(twin, stack, partition, busy + wide, f"{waiting.where} waits for {wide} nodes ({reason})")
    admin(twin, f"scancel {waiting.id}")
    held = sleeper(person, partition, 2, "--hold")
    later = sleeper(person, partition, 2, "--begin=now+2hours")
    after = sleeper(person, partition, 2, f"--dependency=afterok:{running.id}")
    elsewhere = [sleeper(person, other, 1, "--hold") for other in others]
    for job, reason in ((held, "JobHeldUser"), (later, "BeginTime"), (after, "Dependency")):
        wait_for(twin, job, ("PENDING",), 30, reason=reason)
    expect_replicas(twin, stack, partition, busy, f"{held.where} held, {later.where} begins in 2 h, {after.where} "
                    "waits on a dependency: none of them could start")
    admin(twin, f"scancel {held.id} {later.id} {after.id} {' '.join(str(j.id) for j in elsewhere)}")
    # Over its QoS's cap: the job's QoS allows one running job per person for a while.
    qos = admin(twin, f"squeue -h -j {running.id} -o %q").stdout.strip()
    admin(twin, f"sacctmgr -i modify qos {qos} set MaxJobsPerUser=1")
    try:
        capped = sleeper(person, partition, 2)
        wait_for(twin, capped, ("PENDING",), 30, reason="QOSMaxJobsPerUserLimit")
        expect_replicas(twin, stack, partition, busy, f"{capped.where} is over its QoS {qos}'s cap")
        admin(twin, f"scancel {capped.id}")
    finally:
        admin(twin, f"sacctmgr -i modify qos {qos} set MaxJobsPerUser=-1")
    admin(twin, f"scancel {running.id}")
    wait_for(twin, running, ("CANCELLED",), 60)
    expect_replicas(twin, stack, partition, 0, "every job is gone")

