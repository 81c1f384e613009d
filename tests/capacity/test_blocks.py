"""The Capacity Block step: EndDate from DescribeCapacityReservations through the agents' boto3 client, answered by
botocore's Stubber (tests/agent/ec2.py: moto has no DescribeCapacityReservations; the answers are validated against
botocore's DescribeCapacityReservationsResult / CapacityReservation shapes, values ours), then one maintenance
reservation per block starting 40 minutes before its end."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from slurm.agent.capacity.blocks import block_ends, capacity_pass
from slurm.agent.capacity.reservations import scontrol_time
from tests.agent.ec2 import stubbed_ec2

NOW = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)
OPERATION = "describe_capacity_reservations"
END = datetime(2026, 12, 9, 11, 30, tzinfo=UTC)


def reservation(rid: str, kind: str = "capacity-block", end: datetime = END) -> dict[str, Any]:
    """A CapacityReservation as botocore returns it (EndDate parsed to an aware datetime)."""
    return {"CapacityReservationId": rid, "InstanceType": "p5.48xlarge", "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": "us-west-2a", "Tenancy": "default", "TotalInstanceCount": 4,
            "AvailableInstanceCount": 4, "State": "active", "StartDate": NOW + timedelta(minutes=30),
            "EndDate": end, "EndDateType": "limited", "InstanceMatchCriteria": "targeted", "ReservationType": kind}


def answer(stub: Stubber, rid: str, found: dict[str, Any] | None) -> None:
    """One call for `rid` alone; EC2's answer for an id it does not know is an error, not an empty list."""
    expected = {"CapacityReservationIds": [rid]}
    if found is None:
        stub.add_client_error(OPERATION, "InvalidCapacityReservationId.NotFound",
                              f"The capacity reservation ID '{rid}' does not exist", 400, expected_params=expected)
    else:
        stub.add_response(OPERATION, {"CapacityReservations": [found]}, expected)


def test_block_ends_skip_odcrs_and_reservations_ec2_forgot(monkeypatch: pytest.MonkeyPatch) -> None:
    ec2, stub = stubbed_ec2(monkeypatch)
    a, b, c = "cr-0aaaaaaaaaaaaaaa1", "cr-0bbbbbbbbbbbbbbb2", "cr-0ccccccccccccccc3"
    answer(stub, a, reservation(a, end=END.astimezone(timezone(timedelta(hours=-8)))))  # any offset: read as UTC
    answer(stub, b, reservation(b, kind="default"))
    answer(stub, c, None)
    ends = block_ends(ec2, [c, a, b, a])  # each id once, sorted
    stub.assert_no_pending_responses()
    assert ends == {a: END} and ends[a].tzinfo is UTC


def test_an_error_other_than_not_found_fails_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    ec2, stub = stubbed_ec2(monkeypatch)
    stub.add_client_error(OPERATION, "UnauthorizedOperation", "not allowed", 403,
                          expected_params={"CapacityReservationIds": ["cr-0aaaaaaaaaaaaaaa1"]})
    with pytest.raises(ClientError, match="UnauthorizedOperation"):
        block_ends(ec2, ["cr-0aaaaaaaaaaaaaaa1"])


def test_one_maintenance_reservation_per_block_from_forty_minutes_before_its_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        ran.append(list(argv))
        return "No reservations in the system\n" if "show" in argv else ""

    ec2, stub = stubbed_ec2(monkeypatch)
    answer(stub, "cr-0aaaaaaaaaaaaaaa1", reservation("cr-0aaaaaaaaaaaaaaa1"))
    capacity_pass(ec2, {"gpu-h100": ["cr-0aaaaaaaaaaaaaaa1"]}, NOW, run)
    create = ran[-1]
    assert create[:4] == ["scontrol", "create", "reservation", "ReservationName=slurm-eks-cb-cr-0aaaaaaaaaaaaaaa1"]
    assert "PartitionName=gpu-h100" in create and "Flags=MAINT,IGNORE_JOBS,PART_NODES" in create
    # 11:30 UTC end - 40 min, in the local time scontrol reads
    assert f"StartTime={scontrol_time(datetime(2026, 12, 9, 10, 50, tzinfo=UTC))}" in create
