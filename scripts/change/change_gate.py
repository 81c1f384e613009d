"""The change gate of `preview` and `up`: the deployed record (a file, or the stack's output through `pulumi`),
the new config against it by update policy, the running cluster asked where a policy needs it, `--force` applied.
Refused changes stop the hand-over to Pulumi."""

from __future__ import annotations

from dataclasses import dataclass, field

from components.config.cluster import ClusterConfig
from components.config.deployed_record import OUTPUT
from components.config.update_policy import Kind
from scripts.change import deployed as deployed_io
from scripts.change.cluster_facts import ClusterFacts, FactsUnavailable, drain_and_wait, judge
from scripts.change.compare import Change, apply_force, compare
from scripts.offline.plan_model import Plan


class ChangeGateError(ValueError):
    """Bad input to the gate: an unreadable record, a `--force` key that names no change."""


@dataclass
class ChangeSet:
    source: str  # where the deployed record came from; "" when there is none
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def refused(self) -> list[Change]:
        return [c for c in self.changes if c.refused]


def change_set(stack: str, config: ClusterConfig, record: deployed_io.Deployed | None, facts: ClusterFacts | None,
               force: list[str], drain_timeout_s: float | None = None) -> ChangeSet:
    """`config` against `record`; with `drain_timeout_s`, a partition that goes is drained and waited for first."""
    if record is None:
        return ChangeSet("", notes=[f"stack {stack}: no deployed record (a new stack, or one last deployed before "
                                    "records): nothing to compare; this `up` leaves one"])
    if record.stack and record.stack != stack:
        raise ChangeGateError(f"{record.source} is the record of stack {record.stack}, not {stack}")
    new = config.model_dump(by_alias=True, mode="json")
    result = ChangeSet(record.source, compare(record.config, new))
    if drain_timeout_s is not None and facts is not None:
        for change in result.changes:
            if change.policy.kind is Kind.PARTITION_IDLE and not change.problem:
                try:
                    left = drain_and_wait(facts, str(change.key[-1]), drain_timeout_s)
                except FactsUnavailable as exc:
                    result.notes.append(f"could not drain partition {change.key[-1]}: {exc}")
                    continue
                result.notes.append(f"drained partition {change.key[-1]}: " + (
                    f"{len(left)} job(s) still there after {drain_timeout_s:.0f} s" if left else "idle"))
    judge(result.changes, facts)
    unused = apply_force(result.changes, force)
    if unused:
        raise ChangeGateError(f"--force {', '.join(unused)}: names no change of this update; the changes are "
                              f"{', '.join(c.name for c in result.changes) or 'none'}")
    return result


def plan_config_changes(before: Plan, after: Plan) -> list[Change] | None:
    """The config changes between two plans' records (`slurm-eks diff`), judged as offline (nobody asked the
    cluster); None when either plan carries no record."""
    try:
        old = deployed_io.parse({OUTPUT: before.outputs.get(OUTPUT)}, "before")
        new = deployed_io.parse({OUTPUT: after.outputs.get(OUTPUT)}, "after")
    except deployed_io.DeployedUnreadable:
        return None
    found = compare(old.config, new.config)
    judge(found, None)
    return found
