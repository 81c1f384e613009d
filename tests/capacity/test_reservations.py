"""The pure part of slurm/agent/capacity/reservations.py: which reservation a Capacity Block wants, how scontrol's text
is read, and which scontrol commands bring the cluster there (the real Slurm: tests/integration/
test_capacity_reservation.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from jobs.render import slurm_time_seconds  # preflight's reading of maxTime
from slurm.agent.capacity.reservations import (
    EMPTY_PARTITION,
    LEAD,
    BlockReservation,
    ExistingReservation,
    NoNodesYet,
    ReservationError,
    apply,
    desired_reservation,
    parse_reservations,
    plan,
    reservation_name,
    run_scontrol,
)

CR = "cr-0123456789abcdef0"
END = datetime(2026, 12, 9, 11, 30, 45, tzinfo=UTC)  # EC2 EndDate of the block
BEFORE = END - timedelta(days=2)
NAME = "slurm-eks-cb-cr-0123456789abcdef0"
SHOWN = ("ReservationName=slurm-eks-cb-cr-0123456789abcdef0 StartTime=2026-12-09T10:50:00 EndTime=2026-12-09T12:01:00 "
         "Duration=01:11:00 Nodes=vm NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=gpu-h100 "
         "Flags=MAINT,IGNORE_JOBS,SPEC_NODES,PART_NODES TRES=cpu=2 Users=root Groups=(null) Accounts=(null) "
         "Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)\n"
         "ReservationName=upgrade StartTime=2026-12-10T00:00:00 EndTime=2026-12-10T02:00:00 Duration=02:00:00 "
         "Nodes=ALL NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES TRES=cpu=2 "
         "Users=(null) Groups=(null) Accounts=ops Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a "
         "MaxStartDelay=(null)\n")


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """scontrol times are the process's local time; these tests read and write them in UTC."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def want(end: datetime = END, now: datetime = BEFORE, partition: str = "gpu-h100") -> BlockReservation:
    found = desired_reservation(partition, CR, end, now)
    assert found is not None
    return found


def test_the_reservation_starts_when_karpenter_takes_the_nodes_and_outlives_the_block() -> None:
    r = want()
    assert timedelta(minutes=40) == LEAD
    assert (r.name, r.partition, r.users) == (NAME, "gpu-h100", ("root",))
    assert r.start == datetime(2026, 12, 9, 10, 50, tzinfo=UTC)  # 40 minutes before, down to the minute
    assert r.end == END + timedelta(minutes=30)
    assert r.duration_minutes == 71  # 10:50:00 to 12:00:45, rounded up
    assert r.create_argv() == [
        "scontrol", "create", "reservation", f"ReservationName={NAME}", "StartTime=2026-12-09T10:50:00",
        "Duration=71", "PartitionName=gpu-h100", "Nodes=ALL", "Flags=MAINT,IGNORE_JOBS,PART_NODES", "Users=root"]


def test_a_block_inside_its_lead_gets_a_reservation_from_now_and_none_once_over() -> None:
    now = END - timedelta(minutes=10, seconds=30)
    r = want(now=now)
    assert r.start == now.replace(microsecond=0)
    assert desired_reservation("gpu-h100", CR, END, END + timedelta(minutes=30)) is None


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        desired_reservation("gpu-h100", CR, END.replace(tzinfo=None), BEFORE)


def test_scontrol_text_is_read_ours_and_others() -> None:
    found = parse_reservations(SHOWN)
    assert found[NAME] == ExistingReservation(
        NAME, "gpu-h100", datetime(2026, 12, 9, 10, 50, tzinfo=UTC), datetime(2026, 12, 9, 12, 1, tzinfo=UTC),
        frozenset({"MAINT", "IGNORE_JOBS", "SPEC_NODES", "PART_NODES"}), ("root",))
    assert (found["upgrade"].partition, found["upgrade"].users) == (None, ())
    assert parse_reservations("No reservations in the system\n") == {}


def test_plan_creates_the_missing_and_leaves_an_equal_one_alone() -> None:
    assert plan([want()], {}, BEFORE) == [want().create_argv()]
    assert plan([want()], parse_reservations(SHOWN), BEFORE) == []


def test_plan_moves_a_changed_end_and_deletes_only_ours_whose_block_is_gone() -> None:
    later = want(end=END + timedelta(hours=2))
    assert plan([later], parse_reservations(SHOWN), BEFORE) == [
        ["scontrol", "update", f"ReservationName={NAME}", "StartTime=2026-12-09T12:50:00", "Duration=71"]]
    # The other reservation ("upgrade") is an operator's: never touched.
    assert plan([], parse_reservations(SHOWN), BEFORE) == [["scontrol", "delete", f"ReservationName={NAME}"]]


def test_a_started_reservation_keeps_its_start_and_moves_only_its_end() -> None:
    now = END - timedelta(minutes=20)
    have = parse_reservations(SHOWN)
    assert plan([want(now=now)], have, now) == []  # the wanted start is "now": nothing to move
    # The block was extended: 10 minutes, and its reservation still holds (only the end moves); an hour, and the
    # reservation starts again 40 minutes before the new end.
    assert plan([want(end=END + timedelta(minutes=10), now=now)], have, now) == [
        ["scontrol", "update", f"ReservationName={NAME}", "EndTime=2026-12-09T12:10:45"]]
    assert plan([want(end=END + timedelta(hours=1), now=now)], have, now)[0][2:4] == [
        f"ReservationName={NAME}", "StartTime=2026-12-09T11:50:00"]
    longer = BlockReservation(NAME, "gpu-h100", now, END + timedelta(hours=1))
    assert plan([longer], have, now) == [
        ["scontrol", "update", f"ReservationName={NAME}", "EndTime=2026-12-09T12:30:45"]]


@pytest.mark.parametrize("change", [
    {"partition": "gpu-a100"}, {"flags": frozenset({"MAINT"})}, {"users": ("slurm",)}])
def test_a_reservation_of_another_partition_flags_or_users_is_recreated(change: dict) -> None:
    have = parse_reservations(SHOWN)[NAME]
    fields = {**have.__dict__, **change}
    assert plan([want()], {NAME: ExistingReservation(**fields)}, BEFORE) == [
        ["scontrol", "delete", f"ReservationName={NAME}"], want().create_argv()]


def test_apply_reads_then_runs_the_plan() -> None:
    ran: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        ran.append(list(argv))
        return SHOWN if argv[1:] == ["-o", "show", "reservation"] else ""

    assert apply([], BEFORE, run=run) == [["scontrol", "delete", f"ReservationName={NAME}"]]
    assert ran == [["scontrol", "-o", "show", "reservation"], ["scontrol", "delete", f"ReservationName={NAME}"]]


def test_a_refused_command_raises_with_its_message() -> None:
    with pytest.raises(ReservationError, match="false"):
        run_scontrol(["false"])


def test_names_and_time_limits() -> None:
    assert reservation_name(CR) == NAME
    assert [slurm_time_seconds(v) for v in ("90", "1:30", "01:00:00", "1-12", "7-00:00:00", "2-1:30")] == [
        5400, 90, 3600, 129600, 604800, 178200]
    assert slurm_time_seconds("UNLIMITED") is None and slurm_time_seconds("infinite") is None
    with pytest.raises(ValueError):
        slurm_time_seconds("7 days")


def test_a_partition_without_nodes_waits_and_the_rest_still_runs() -> None:
    ran: list[list[str]] = []
    other = desired_reservation("gpu-a100", "cr-0bbbbbbbbbbbbbbb2", END, BEFORE)
    assert other is not None

    def run(argv: Sequence[str]) -> str:
        ran.append(list(argv))
        if argv[1:3] == ["-o", "show"]:
            return "No reservations in the system\n"
        if "PartitionName=gpu-h100" in argv:
            raise ReservationError(f"{' '.join(argv)}: Error creating the reservation: {EMPTY_PARTITION}")
        return ""

    with pytest.raises(NoNodesYet, match="no node yet in partition gpu-h100") as caught:
        apply([want(), other], BEFORE, run=run)
    assert caught.value.waiting == [want().create_argv()]
    assert ran[-1] == other.create_argv()  # the other block's reservation was still made


def test_any_other_refusal_stops_the_pass() -> None:
    def run(argv: Sequence[str]) -> str:
        if argv[1:3] == ["-o", "show"]:
            return "No reservations in the system\n"
        raise ReservationError("scontrol: Access/permission denied")

    with pytest.raises(ReservationError, match="permission denied"):
        apply([want()], BEFORE, run=run)
