"""The Capacity Block step: EndDate from DescribeCapacityReservations (answers in the shape of botocore's EC2
model, DescribeCapacityReservationsResult / CapacityReservation, values ours), then one maintenance reservation
per block starting 40 minutes before its end."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import UTC, datetime

from slurm.aws.query import AwsError
from slurm.capacity.blocks import block_ends, capacity_pass
from slurm.capacity.reservations import scontrol_time

NOW = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)


def answer(rid: str, kind: str = "capacity-block", end: str = "2026-12-09T11:30:00.000Z") -> ET.Element:
    return ET.fromstring(f"""<DescribeCapacityReservationsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>b7ee2d6c-EXAMPLE</requestId>
  <capacityReservationSet><item>
    <capacityReservationId>{rid}</capacityReservationId>
    <instanceType>p5.48xlarge</instanceType><instancePlatform>Linux/UNIX</instancePlatform>
    <availabilityZone>us-west-2a</availabilityZone><tenancy>default</tenancy>
    <totalInstanceCount>4</totalInstanceCount><availableInstanceCount>4</availableInstanceCount>
    <state>active</state><startDate>2026-12-02T11:30:00.000Z</startDate><endDate>{end}</endDate>
    <endDateType>limited</endDateType><instanceMatchCriteria>targeted</instanceMatchCriteria>
    <reservationType>{kind}</reservationType>
  </item></capacityReservationSet>
</DescribeCapacityReservationsResponse>""")


def ec2(known: dict[str, ET.Element]):
    def call(action: str, params: dict[str, str]) -> ET.Element:
        assert action == "DescribeCapacityReservations" and list(params) == ["CapacityReservationId.1"]
        rid = params["CapacityReservationId.1"]
        if rid not in known:
            raise AwsError(f"https://ec2.us-west-2.amazonaws.com/: HTTP 400: InvalidCapacityReservationId.NotFound: "
                           f"The capacity reservation ID '{rid}' does not exist")
        return known[rid]
    return call


def test_block_ends_skip_odcrs_and_reservations_ec2_forgot() -> None:
    call = ec2({"cr-0aaaaaaaaaaaaaaa1": answer("cr-0aaaaaaaaaaaaaaa1"),
                "cr-0bbbbbbbbbbbbbbb2": answer("cr-0bbbbbbbbbbbbbbb2", kind="default")})
    ends = block_ends(call, ["cr-0aaaaaaaaaaaaaaa1", "cr-0bbbbbbbbbbbbbbb2", "cr-0ccccccccccccccc3"])
    assert ends == {"cr-0aaaaaaaaaaaaaaa1": datetime(2026, 12, 9, 11, 30, tzinfo=UTC)}


def test_one_maintenance_reservation_per_block_from_forty_minutes_before_its_end() -> None:
    ran: list[list[str]] = []

    def run(argv: Sequence[str]) -> str:
        ran.append(list(argv))
        return "No reservations in the system\n" if "show" in argv else ""

    capacity_pass(ec2({"cr-0aaaaaaaaaaaaaaa1": answer("cr-0aaaaaaaaaaaaaaa1")}),
                  {"gpu-h100": ["cr-0aaaaaaaaaaaaaaa1"]}, NOW, run)
    create = ran[-1]
    assert create[:4] == ["scontrol", "create", "reservation", "ReservationName=slurm-eks-cb-cr-0aaaaaaaaaaaaaaa1"]
    assert "PartitionName=gpu-h100" in create and "Flags=MAINT,IGNORE_JOBS,PART_NODES" in create
    # 11:30 UTC end - 40 min, in the local time scontrol reads
    assert f"StartTime={scontrol_time(datetime(2026, 12, 9, 10, 50, tzinfo=UTC))}" in create
