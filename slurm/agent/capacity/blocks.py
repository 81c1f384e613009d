"""The node lifecycle controller's Capacity Block step: each block's EndDate from EC2 DescribeCapacityReservations,
then the Slurm maintenance reservations over the blocks' ends (slurm/agent/capacity/reservations.py).

Through a boto3 EC2 client; names of botocore's EC2 model (botocore/data/ec2/2016-11-15/service-2.json.gz):
DescribeCapacityReservationsRequest.CapacityReservationIds, DescribeCapacityReservationsResult
.CapacityReservations, CapacityReservation (CapacityReservationId, EndDate: a timestamp, which botocore parses to
an aware datetime, ReservationType).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from botocore.client import BaseClient
from botocore.exceptions import ClientError

from slurm.agent.capacity.reservations import BlockReservation, apply, desired_reservation, run_scontrol


def block_ends(ec2: BaseClient, reservation_ids: Sequence[str]) -> dict[str, datetime]:
    """Reservation id -> EndDate (UTC) of each listed Capacity Block EC2 still knows; other kinds are left out.
    One call per id: an id EC2 no longer knows fails its whole call (InvalidCapacityReservationId.NotFound), and
    must not hide the others."""
    ends: dict[str, datetime] = {}
    for rid in sorted(set(reservation_ids)):
        try:
            answer = ec2.describe_capacity_reservations(CapacityReservationIds=[rid])
        except ClientError as exc:
            # botocore/exceptions.py ClientError: the EC2 error code is response["Error"]["Code"].
            if "NotFound" in exc.response.get("Error", {}).get("Code", ""):
                continue
            raise
        for item in answer.get("CapacityReservations") or ():
            end = item.get("EndDate")
            if item.get("ReservationType") == "capacity-block" and end:
                ends[item.get("CapacityReservationId") or rid] = end.astimezone(UTC)
    return ends


def capacity_pass(ec2: BaseClient, blocks: Mapping[str, Sequence[str]], now: datetime,
                  run: Callable[[Sequence[str]], str] = run_scontrol) -> list[list[str]]:
    """Keep one maintenance reservation per block (partition -> its block ids); returns the scontrol commands run."""
    ends = block_ends(ec2, [rid for ids in blocks.values() for rid in ids])
    wanted: list[BlockReservation] = []
    for partition, ids in sorted(blocks.items()):
        for rid in ids:
            if rid in ends and (reservation := desired_reservation(partition, rid, ends[rid], now)):
                wanted.append(reservation)
    return apply(wanted, now, run=run)
