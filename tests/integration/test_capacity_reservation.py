"""The maintenance reservation over a Capacity Block's end (slurm/agent/capacity/reservations.py) on the real local
Slurm (25.11, built from source; our code reads `scontrol -o show reservation` text): made by our code, it keeps
a job that could not finish before the block's nodes go away pending, while a job that ends in time starts."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from slurm import client
from slurm.agent.capacity import reservations
from slurm.backend import SubmitOptions
from slurm.cli_backend import CliBackend
from slurm.jobinfo import JobInfo
from slurm.local.config import PARTITION
from slurm.local.settings import with_settings

pytestmark = pytest.mark.slurm
BACKEND = CliBackend()
BLOCK = "cr-0fedcba9876543210"


@pytest.fixture
def block_ending_soon() -> Iterator[reservations.BlockReservation]:
    """A block whose nodes Karpenter takes away in about 5 minutes; its reservation is removed afterwards."""
    now = datetime.now(UTC)
    want = reservations.desired_reservation(PARTITION, BLOCK, now + reservations.LEAD + timedelta(minutes=6), now)
    assert want is not None
    reservations.apply([want], now)
    try:
        yield want
    finally:
        reservations.apply([], datetime.now(UTC))  # ours, whose block is gone: deleted


def submit(tmp_path: Path, name: str, time_limit: str) -> int:
    script = tmp_path / f"{name}.sbatch"
    script.write_text("#!/bin/bash\nsleep 20\n")
    return client.submit(script, SubmitOptions(job_name=name, time=time_limit, output=str(tmp_path / "%x-%j.out")),
                         BACKEND)


def wait_until(job_id: int, done: Callable[[JobInfo], bool], timeout_s: float = 60) -> JobInfo:
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.status(job_id, BACKEND)
        if done(job) or time.monotonic() > deadline:
            return job
        time.sleep(1)


def test_a_job_crossing_the_block_end_waits_and_a_short_one_runs(
        tmp_path: Path, block_ending_soon: reservations.BlockReservation) -> None:
    shown = subprocess.run(["scontrol", "-o", "show", "reservation", block_ending_soon.name], capture_output=True,
                           text=True, check=True).stdout
    [found] = reservations.parse_reservations(shown).values()
    assert (found.partition, found.users) == (PARTITION, ("root",))
    assert {"MAINT", "IGNORE_JOBS", "PART_NODES"} <= found.flags
    assert found.start == block_ending_soon.start  # 40 minutes before the block's end, to the minute
    long_job = submit(tmp_path, "crosses-the-end", "30")  # 30 minutes: it would still run when the nodes go
    short_job = submit(tmp_path, "ends-in-time", "1")
    try:
        short = wait_until(short_job, lambda j: j.state in ("RUNNING", "COMPLETED"))
        assert short.state in ("RUNNING", "COMPLETED"), short
        long = wait_until(long_job, lambda j: j.reason not in (None, "None", "Priority"), timeout_s=30)
        assert long.state == "PENDING", long
        # The reason code: Slurm 25.11 gives ReqNodeNotAvail ("Reserved for maintenance") when the main scheduler
        # meets the maintenance reservation, Reservation when a pass finds it busy (src/slurmctld/node_scheduler.c,
        # ESLURM_RESERVATION_MAINT and ESLURM_RESERVATION_BUSY): which one a run sees depends on which pass came.
        assert long.reason in ("ReqNodeNotAvail", "Reservation"), long
        why = subprocess.run(["squeue", "-h", "-j", str(long_job), "-o", "%R"], capture_output=True, text=True,
                             check=True).stdout
        assert "Reserved for maintenance" in why, why
    finally:
        for job_id in (long_job, short_job):
            client.cancel(job_id, BACKEND)
    assert reservations.plan([block_ending_soon], reservations.parse_reservations(shown), datetime.now(UTC)) == []


def test_a_block_inside_its_lead_is_held_from_now_and_an_extension_moves_only_the_end() -> None:
    """Inside the last 40 minutes the reservation starts at once; a started reservation keeps its start (scontrol
    update EndTime=), and our code deletes it once the block is gone."""
    now = datetime.now(UTC)
    want = reservations.desired_reservation(PARTITION, BLOCK, now + timedelta(minutes=20), now)
    assert want is not None
    try:
        reservations.apply([want], now)
        later = datetime.now(UTC)
        extended = reservations.desired_reservation(PARTITION, BLOCK, now + timedelta(minutes=35), later)
        assert extended is not None
        ran = reservations.apply([extended], later)
        assert [argv[1] for argv in ran] == ["update"] and ran[0][3].startswith("EndTime=")
        shown = reservations.parse_reservations(reservations.run_scontrol(["scontrol", "-o", "show", "reservation"]))
        assert shown[want.name].start == want.start and abs(shown[want.name].end - extended.end) < timedelta(minutes=1)
    finally:
        reservations.apply([], datetime.now(UTC))
    assert want.name not in reservations.parse_reservations(
        reservations.run_scontrol(["scontrol", "-o", "show", "reservation"]))


def test_a_partition_with_no_node_yet_cannot_be_reserved_and_says_so() -> None:
    """A block partition at minNodes 0 has no Slurm node until Karpenter launches one: slurmctld refuses a
    PART_NODES reservation on it, which apply() reports as NoNodesYet (and the controller tries each pass)."""
    now = datetime.now(UTC)
    want = reservations.desired_reservation("empty", BLOCK, now + timedelta(days=1), now)
    assert want is not None
    with with_settings(["PartitionName=empty State=UP MaxTime=INFINITE"]):
        with pytest.raises(reservations.NoNodesYet) as caught:
            reservations.apply([want], now)
        shown = reservations.parse_reservations(reservations.run_scontrol(["scontrol", "-o", "show", "reservation"]))
    assert caught.value.waiting == [want.create_argv()] and want.name not in shown
