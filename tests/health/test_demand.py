"""The nodes KEDA scales each partition to from its pending jobs (slurm/agent/health/demand.py): only jobs that would
start if the nodes existed count, read from a recorded Slurm 25.11 `squeue --json` (data_parser v0.0.44 shapes:
states are lists, numbers {set, infinite, number}) and from 22.05's plain shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slurm.agent import contract as m
from slurm.agent.health.demand import SOON_S, WAITING_FOR_NODES, array_tasks, demand_pass, job_nodes, nodes_wanted
from slurm.agent.health.slurm_access import SlurmError
from slurm.agent.metrics import Registry
from tests.slurm.test_fixture_schema import SCHEMA, SHAPES

DATA = Path(__file__).parent / "data"
PENDING = json.loads((DATA / "squeue-pending-25.11.json").read_text())
NOW = 1767230000  # the recording's last_update
MAX_NODES = {"gpu-h100": 8, "gpu-a100": 16, "trainium": 32}  # the prod stack's maxNodes


def test_the_recording_has_slurm_25_11s_names_and_shapes() -> None:
    known = set(SCHEMA["squeue"]["fields"])
    # What demand.py reads, with its data_parser v0.0.44 type (src/plugins/data_parser/v0.0.44/parsers.c,
    # PARSER_ARRAY(JOB_INFO)): hold is the HOLD overload of priority, a bool.
    read = {"job_state": "JOB_STATE", "state_reason": "JOB_REASON", "partition": "STRING", "node_count":
            "UINT32_NO_VAL", "priority": "UINT32_NO_VAL", "eligible_time": "TIMESTAMP_NO_VAL",
            "array_task_string": "STRING", "array_max_tasks": "UINT32_NO_VAL"}
    for job in PENDING["jobs"]:
        assert set(job) <= known, set(job) - known
        assert isinstance(job["hold"], bool)
        for field, kind in read.items():
            assert SHAPES[kind](job[field]), (job["job_id"], field, job[field])


def test_only_jobs_that_could_start_count_their_nodes() -> None:
    per_job = {job["job_id"]: job_nodes(job, MAX_NODES, NOW)[1] for job in PENDING["jobs"]}
    assert per_job == {
        200: 0,  # running: its nodes are busy, counted by Slurm's own metrics
        201: 4, 202: 2, 203: 1,  # Resources, Priority, None (not yet looked at)
        204: 0, 205: 0,  # JobHeldUser, JobHeldAdmin
        206: 0,  # Dependency
        207: 0,  # BeginTime tomorrow
        208: 2,  # BeginTime in 121 s: a requeue's delay (its nodes are kept)
        209: 0, 210: 0,  # QOSMaxNodePerUserLimit, AssocGrpGRES
        211: 0,  # Reservation
        212: 2,  # PartitionConfig: trainium scaled to zero
        213: 0,  # PartitionNodeLimit, but 40 nodes: more than trainium's maxNodes 32, it can never start
        214: 3,  # ReqNodeNotAvail: its nodes are down or drained
        215: 0,  # a partition of no NodeSet here
        216: 0,  # pending again while its last run still completes: those nodes are busy
        217: 4,  # an array of 10 pending tasks, at most 4 at a time (%4)
        218: 1,  # pending in gpu-a100 and gpu-h100: counts in the first
        219: 0,  # JobArrayTaskLimit
        220: 0,  # DependencyNeverSatisfied
    }
    assert nodes_wanted(PENDING, MAX_NODES, NOW) == {"gpu-h100": 9, "gpu-a100": 8, "trainium": 2}
    # Slurm's slurm_partition_jobs_pending counts every pending job of the partition (statistics.c):
    slurms = sum(j["partition"] == "gpu-h100" and j["job_state"][0] == "PENDING" for j in PENDING["jobs"])
    assert slurms == 13  # against 9 nodes wanted here: held, dependent, capped jobs count too


def _job(reason: str, **more: Any) -> dict[str, Any]:
    return {"job_state": ["PENDING"], "state_reason": reason, "partition": "gpu-h100",
            "node_count": {"set": True, "infinite": False, "number": 2}, "hold": False,
            "priority": {"set": True, "infinite": False, "number": 1000}, **more}


@pytest.mark.parametrize("reason", sorted(WAITING_FOR_NODES))
def test_reasons_that_wait_for_nodes_count(reason: str) -> None:
    assert job_nodes(_job(reason), MAX_NODES, NOW) == ("gpu-h100", 2)


# job_state_reason strings of Slurm 25.11 (src/common/job_state_reason.c) that new nodes do not help.
@pytest.mark.parametrize("reason", [
    "JobHeldUser", "JobHeldAdmin", "JobHoldMaxRequeue", "Dependency", "DependencyNeverSatisfied", "BeginTime",
    "QOSJobLimit", "QOSResourceLimit", "QOSGrpNodeLimit", "QOSGrpGRES", "QOSMaxNodePerUserLimit",
    "QOSMaxGRESPerUser", "QOSUsageThreshold", "AssociationJobLimit", "AssociationResourceLimit",
    "AssocGrpNodeLimit", "AssocGrpGRES", "AssocMaxJobsLimit", "MaxGRESPerAccount", "Reservation",
    "ReservationDeleted", "Licenses", "JobArrayTaskLimit", "PartitionDown", "PartitionInactive",
    "PartitionTimeLimit", "AccountNotAllowed", "QOSNotAllowed", "InvalidAccount", "InvalidQOS", "BadConstraints",
    "Cleaning", "SchedDefer", "ASomeReasonOfALaterSlurm",
])
def test_every_other_reason_counts_zero(reason: str) -> None:
    assert job_nodes(_job(reason), MAX_NODES, NOW) == ("gpu-h100", 0)


def test_holds_and_begin_times_at_the_boundary() -> None:
    held = {"hold": True, "priority": {"set": True, "infinite": False, "number": 0}}
    assert job_nodes(_job("Resources", **held), MAX_NODES, NOW)[1] == 0  # held whatever the reason says
    soon = {"set": True, "infinite": False, "number": NOW + SOON_S}
    assert job_nodes(_job("BeginTime", eligible_time=soon), MAX_NODES, NOW)[1] == 2
    later = {**soon, "number": NOW + SOON_S + 1}
    assert job_nodes(_job("BeginTime", eligible_time=later), MAX_NODES, NOW)[1] == 0
    at_max = {"set": True, "infinite": False, "number": 8}
    assert job_nodes(_job("PartitionNodeLimit", node_count=at_max), MAX_NODES, NOW)[1] == 8
    over = {**at_max, "number": 9}
    assert job_nodes(_job("PartitionNodeLimit", node_count=over), MAX_NODES, NOW)[1] == 0


def test_slurm_22_05_shapes() -> None:
    """openapi v0.0.38: a state string, plain numbers, no hold field (priority 0 is a hold)."""
    old = {"job_state": "PENDING", "state_reason": "Resources", "partition": "gpu-h100", "node_count": 3,
           "priority": 4294}
    assert job_nodes(old, MAX_NODES, NOW)[1] == 3
    assert job_nodes({**old, "priority": 0, "state_reason": "JobHeldUser"}, MAX_NODES, NOW)[1] == 0
    assert job_nodes({**old, "job_state": "RUNNING"}, MAX_NODES, NOW)[1] == 0


@pytest.mark.parametrize(("text", "tasks"), [("0-9", 10), ("1,3,5-9:2", 5), ("0-9%4", 10), ("7", 1),
                                             ("0-99,200-2...", 100), ("garbage", 1)])
def test_array_task_strings(text: str, tasks: int) -> None:
    assert array_tasks(text) == tasks


class FakeSlurm:
    def __init__(self, document: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.document, self.error = document, error

    def pending_jobs(self) -> dict[str, Any]:
        if self.error:
            raise self.error
        return self.document or {"jobs": []}


def test_every_partition_is_published_zero_included_and_a_failure_withdraws_them() -> None:
    metrics, logged = Registry(), []
    demand_pass(FakeSlurm({"jobs": [_job("Resources")]}), metrics, MAX_NODES, NOW, logged.append)
    text = metrics.render()
    assert 'slurm_eks_partition_nodes_wanted{partition="gpu-h100"} 2.0' in text
    assert 'slurm_eks_partition_nodes_wanted{partition="trainium"} 0.0' in text  # present: no fallback
    assert demand_pass(FakeSlurm(error=SlurmError("squeue: exit 1")), metrics, MAX_NODES, NOW, logged.append) is None
    # Gone, so the KEDA query falls back to Slurm's own count instead of a stale one.
    assert "slurm_eks_partition_nodes_wanted{" not in metrics.render()
    assert metrics.value(m.REPAIR_ERRORS, {"step": "slurm-pending-jobs"}) == 1
    assert logged == [{"time": NOW, "event": "error", "step": "slurm-pending-jobs", "error": "squeue: exit 1"}]


def test_the_controller_counts_the_stacks_partitions_with_their_max_nodes() -> None:
    from components.config.stackfile import load_stack
    from components.lifecycle.node_repair import DEMAND_SECONDS, settings
    from slurm.agent.health.__main__ import Controller

    config, _ = load_stack("prod")
    controller = Controller.from_settings(json.loads(settings(config).json()))
    assert controller.demand == MAX_NODES == {n: p.max_nodes for n, p in config.partitions.items()}
    assert controller.demand_seconds == DEMAND_SECONDS
