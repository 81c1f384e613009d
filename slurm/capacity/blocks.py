"""The node lifecycle controller's Capacity Block step: each block's EndDate from EC2 DescribeCapacityReservations,
then the Slurm maintenance reservations over the blocks' ends (slurm/capacity/reservations.py).

Element names of the EC2 Query API answer: botocore data/ec2/2016-11-15/service-2.json,
DescribeCapacityReservationsResult (capacityReservationSet, nextToken) and CapacityReservation
(capacityReservationId, endDate, reservationType); the request's list is `CapacityReservationId.N`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from slurm.aws.query import EC2_NAMESPACE, AwsError
from slurm.capacity.reservations import BlockReservation, apply, desired_reservation, run_scontrol

NAMESPACE = f"{{{EC2_NAMESPACE}}}"
ACTION = "DescribeCapacityReservations"
Call = Callable[[str, dict[str, str]], ET.Element]


def block_ends(call: Call, reservation_ids: Sequence[str]) -> dict[str, datetime]:
    """Reservation id -> EndDate (UTC) of each listed Capacity Block EC2 still knows; other kinds are left out.
    One call per id: an id EC2 no longer knows fails its whole call (InvalidCapacityReservationId.NotFound), and
    must not hide the others."""
    ends: dict[str, datetime] = {}
    for rid in sorted(set(reservation_ids)):
        try:
            root = call(ACTION, {"CapacityReservationId.1": rid})
        except AwsError as exc:
            if "NotFound" in str(exc):
                continue
            raise
        for item in root.iterfind(f"{NAMESPACE}capacityReservationSet/{NAMESPACE}item"):
            end = item.findtext(f"{NAMESPACE}endDate")
            if item.findtext(f"{NAMESPACE}reservationType") == "capacity-block" and end:
                ends[item.findtext(f"{NAMESPACE}capacityReservationId") or rid] = datetime.fromisoformat(
                    end.replace("Z", "+00:00"))
    return ends


def capacity_pass(call: Call, blocks: Mapping[str, Sequence[str]], now: datetime,
                  run: Callable[[Sequence[str]], str] = run_scontrol) -> list[list[str]]:
    """Keep one maintenance reservation per block (partition -> its block ids); returns the scontrol commands run."""
    ends = block_ends(call, [rid for ids in blocks.values() for rid in ids])
    wanted: list[BlockReservation] = []
    for partition, ids in sorted(blocks.items()):
        for rid in ids:
            if rid in ends and (reservation := desired_reservation(partition, rid, ends[rid], now)):
                wanted.append(reservation)
    return apply(wanted, now, run=run)
