"""A Slurm maintenance reservation over the end of each Capacity Block, so that no job starts that cannot finish
before EC2 takes the block's instances away.

Standard library only: this runs in a container that has python3 and Slurm's `scontrol`.

The timeline of a block that ends at EndDate:
- EndDate - 30 min: EC2 begins terminating the block's instances ("With 30 minutes ... left in your Capacity Block
  reservation, we begin terminating any instances that are running in the Capacity Block",
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html).
- EndDate - 40 min: Karpenter marks the reservation `expiring` and deletes the NodeClaims launched into it, 10 min
  before EC2 begins (aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/ec2nodeclass_status.go
  capacityReservationExpirationPeriod = 40 min; pkg/controllers/capacityreservation/expiration/controller.go).
So the reservation starts LEAD (40 min) before EndDate: a job whose time limit reaches past that never starts
(slurmctld does not start a job into a reservation it is not part of), while running jobs are left alone.

Flags (scontrol(1), Slurm 22.05 and 25.11, "Flags=<flags>"):
- MAINT: maintenance mode; may overlap other reservations; nodes show MAINTENANCE.
- IGNORE_JOBS: create it even though jobs run on the nodes now (they will have ended by StartTime, or are cut).
- PART_NODES: with PartitionName= and Nodes=ALL, the reservation's nodes follow the partition's nodes; NodeSet nodes
  are dynamic (they register and leave as Karpenter launches and removes instances), so a fixed node list would go
  stale.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

LEAD = timedelta(minutes=40)  # Karpenter deletes a block's nodes 40 min before its EndDate (see above)
AFTER_END = timedelta(minutes=30)  # the reservation outlives the block a little, then expires by itself
PREFIX = "slurm-eks-cb-"  # the reservations this module owns; any other is left alone
FLAGS = ("MAINT", "IGNORE_JOBS", "PART_NODES")
SCONTROL_TIME = "%Y-%m-%dT%H:%M:%S"  # scontrol reads and prints local times in this form

Runner = Callable[[Sequence[str]], str]


@dataclass(frozen=True)
class BlockReservation:
    """The reservation wanted for one Capacity Block of one partition. Times are aware (UTC)."""

    name: str
    partition: str
    start: datetime
    end: datetime
    users: tuple[str, ...] = ("root",)

    @property
    def duration_minutes(self) -> int:
        return math.ceil((self.end - self.start).total_seconds() / 60)

    def create_argv(self, scontrol: str = "scontrol") -> list[str]:
        return [scontrol, "create", "reservation", f"ReservationName={self.name}",
                f"StartTime={scontrol_time(self.start)}", f"Duration={self.duration_minutes}",
                f"PartitionName={self.partition}", "Nodes=ALL", f"Flags={','.join(FLAGS)}",
                f"Users={','.join(self.users)}"]

    def update_argv(self, scontrol: str = "scontrol", move_start: bool = True) -> list[str]:
        """Moves the reservation; without move_start only its end (by EndTime: a started reservation keeps its
        start, and its Duration counts from there)."""
        if not move_start:
            return [scontrol, "update", f"ReservationName={self.name}", f"EndTime={scontrol_time(self.end)}"]
        return [scontrol, "update", f"ReservationName={self.name}", f"StartTime={scontrol_time(self.start)}",
                f"Duration={self.duration_minutes}"]


@dataclass(frozen=True)
class ExistingReservation:
    """A reservation as `scontrol -o show reservation` prints it (the fields this module compares)."""

    name: str
    partition: str | None
    start: datetime
    end: datetime
    flags: frozenset[str]
    users: tuple[str, ...]


def reservation_name(reservation_id: str) -> str:
    """cr-0123456789abcdef0 -> slurm-eks-cb-cr-0123456789abcdef0."""
    return f"{PREFIX}{reservation_id}"


def scontrol_time(moment: datetime) -> str:
    """An aware time as scontrol parses it: this process's local time (the container's, usually UTC)."""
    return moment.astimezone().strftime(SCONTROL_TIME)


def _parse_local(text: str) -> datetime:
    return datetime.strptime(text, SCONTROL_TIME).astimezone().astimezone(UTC)  # naive: local time


def desired_reservation(partition: str, reservation_id: str, end: datetime, now: datetime,
                        lead: timedelta = LEAD, users: Sequence[str] = ("root",)) -> BlockReservation | None:
    """The reservation over the end of the block `reservation_id` (EC2 EndDate `end`, aware) of `partition`.

    It starts `lead` before `end`, rounded down to the minute (Slurm counts durations in minutes), or now when that
    has passed, and lasts until AFTER_END past `end`. None once that is over: nothing is left to protect.
    """
    if end.tzinfo is None or now.tzinfo is None:
        raise ValueError("end and now must be timezone-aware")
    start = (end - lead).astimezone(UTC).replace(second=0, microsecond=0)
    until = end.astimezone(UTC) + AFTER_END
    if until <= now:
        return None
    start = max(start, now.astimezone(UTC).replace(microsecond=0))
    return BlockReservation(reservation_name(reservation_id), partition, start, until, tuple(users))


def parse_reservations(text: str) -> dict[str, ExistingReservation]:
    """`scontrol -o show reservation` (one reservation a line of Key=Value pairs) -> name -> reservation.

    Text, not JSON: Slurm 22.05's scontrol has no --json; 25.11's (the cluster's and the local test cluster's)
    prints the same text.
    """
    found: dict[str, ExistingReservation] = {}
    for line in text.splitlines():
        fields = dict(pair.split("=", 1) for pair in line.split() if "=" in pair)
        if "ReservationName" not in fields:
            continue  # "No reservations in the system"
        partition = fields.get("PartitionName")
        users = fields.get("Users", "(null)")
        found[fields["ReservationName"]] = ExistingReservation(
            name=fields["ReservationName"],
            partition=None if partition in (None, "(null)") else partition,
            start=_parse_local(fields["StartTime"]),
            end=_parse_local(fields["EndTime"]),
            flags=frozenset(f for f in fields.get("Flags", "").split(",") if f),
            users=() if users == "(null)" else tuple(users.split(",")),
        )
    return found


def plan(desired: Iterable[BlockReservation], existing: Mapping[str, ExistingReservation], now: datetime,
         scontrol: str = "scontrol") -> list[list[str]]:
    """The scontrol argvs that turn `existing` into `desired`: create what is missing, move a changed start or end,
    recreate one whose partition, flags or users differ, delete ours (PREFIX) that no block wants any more."""
    commands: list[list[str]] = []
    wanted = {r.name: r for r in desired}
    for name, want in wanted.items():
        have = existing.get(name)
        if have is None:
            commands.append(want.create_argv(scontrol))
        elif (have.partition, set(FLAGS) <= have.flags, set(have.users)) != (want.partition, True, set(want.users)):
            commands += [_delete_argv(name, scontrol), want.create_argv(scontrol)]
        else:
            # A reservation that has started keeps its start while the wanted one is "now" too (clamped).
            started = have.start <= now and want.start <= now + timedelta(minutes=1)
            if not started and not _same_minute(have.start, want.start):
                commands.append(want.update_argv(scontrol))
            elif not _same_minute(have.end, want.end):
                commands.append(want.update_argv(scontrol, move_start=False))
    commands += [_delete_argv(name, scontrol) for name in sorted(existing)
                 if name.startswith(PREFIX) and name not in wanted]
    return commands


def _same_minute(a: datetime, b: datetime) -> bool:
    return abs((a - b).total_seconds()) < 60


def _delete_argv(name: str, scontrol: str) -> list[str]:
    return [scontrol, "delete", f"ReservationName={name}"]


def run_scontrol(argv: Sequence[str]) -> str:
    """Runs one scontrol command (an argv, no shell) and returns its stdout; a failure raises with its stderr."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise ReservationError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


class ReservationError(RuntimeError):
    """scontrol refused a command."""


# What scontrol answers when a PART_NODES reservation is asked for a partition with no node (seen on the local
# 22.05.8: "Error creating the reservation: Invalid node name specified"). A block partition at minNodes 0 has no
# node until Karpenter launches one, so the reservation can only be made once the first node has registered.
EMPTY_PARTITION = "Invalid node name specified"


class NoNodesYet(ReservationError):
    """Reservations that wait for their partition's first node; the other commands of the pass did run."""

    def __init__(self, waiting: list[list[str]]) -> None:
        names = ", ".join(next(a for a in argv if a.startswith("PartitionName=")).partition("=")[2]
                          for argv in waiting)
        super().__init__(f"no node yet in partition {names}: Slurm cannot reserve an empty partition "
                         f"({EMPTY_PARTITION}); tried again each pass until a node registers")
        self.waiting = waiting


def apply(desired: Iterable[BlockReservation], now: datetime, scontrol: str = "scontrol",
          run: Runner = run_scontrol) -> list[list[str]]:
    """Reads the cluster's reservations, runs the plan, and returns the commands it ran. `desired` holds every
    block of every partition (a missing one is deleted): desired_reservation() of each, the Nones left out."""
    existing = parse_reservations(run([scontrol, "-o", "show", "reservation"]))
    commands = plan(desired, existing, now, scontrol)
    waiting = []
    for argv in commands:
        try:
            run(argv)
        except ReservationError as exc:
            if argv[1] != "create" or EMPTY_PARTITION not in str(exc):
                raise
            waiting.append(argv)
    if waiting:
        raise NoNodesYet(waiting)
    return commands
