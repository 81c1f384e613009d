"""A new stack config against the deployed one, key by key: each change with its update policy, and the conditions
a policy sets that this change does not meet (a shrink of a grow-only size, a skipped Kubernetes minor, a person's
UID changed or reused). Conditions that need the running cluster (a partition's jobs, login sessions) are judged in
scripts/change/cluster_facts.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from components.config.cluster import ClusterConfig
from components.config.config_tree import ANY_NAME, Key, text, values
from components.config.update_policy import Kind, UpdatePolicy, policy_for

Action = Literal["add", "remove", "change"]


@dataclass
class Change:
    key: Key
    pattern: Key
    action: Action
    old: Any
    new: Any
    policy: UpdatePolicy
    problem: str = ""  # an unmet condition: refused unless forced
    forced: bool = False

    @property
    def name(self) -> str:
        return text(self.key)

    @property
    def refused(self) -> bool:
        return (self.policy.kind.refused or bool(self.problem)) and not self.forced


def compare(deployed: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Changes from `deployed` to `new` (both `ClusterConfig` dumped by alias, as JSON): members added or removed
    (and nothing below them), then changed leaves, in key order."""
    before, after = values(ClusterConfig, deployed), values(ClusterConfig, new)
    changes: list[Change] = []
    gone: list[Key] = []
    for key in sorted(before.keys() | after.keys(), key=_order):
        if any(key[:len(g)] == g for g in gone):
            continue  # below a member that came or went: that member is the change
        (kind, old), (_, now) = before.get(key, (None, _ABSENT)), after.get(key, (None, _ABSENT))
        kind = kind or after[key][0]
        pattern, policy = policy_for(key)
        if kind == "member":
            if old is _ABSENT or now is _ABSENT:
                gone.append(key)
                action: Action = "add" if old is _ABSENT else "remove"
                effective = policy.shrink if action == "remove" and policy.shrink else policy
                changes.append(Change(key, pattern, action, None if old is _ABSENT else old,
                                      None if now is _ABSENT else now, effective))
            continue
        if old is _ABSENT or now is _ABSENT or (old == now and type(old) is type(now)):
            continue  # a leaf is in both unless its member came or went
        effective = policy.shrink if policy.shrink and _smaller(old, now) else policy
        changes.append(Change(key, pattern, "change", old, now, effective))
    for change in changes:
        change.problem = _condition(change, deployed, new)
    return changes


_ABSENT = object()


def _order(key: Key) -> tuple[str, ...]:
    return tuple(f"{part:08d}" if isinstance(part, int) else part for part in key)


def _smaller(old: Any, new: Any) -> bool:
    return isinstance(old, int | float) and isinstance(new, int | float) and new < old


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _condition(change: Change, deployed: dict[str, Any], new: dict[str, Any]) -> str:
    """What this change does not meet of its policy's conditions, in words; empty when it meets them."""
    kind, name = change.policy.kind, change.name
    if kind is Kind.GROW_ONLY and _smaller(change.old, change.new):
        return f"{name} shrinks from {change.old} to {change.new}"
    if change.pattern == ("kubernetesVersion",):
        old, now = _minor(str(change.old)), _minor(str(change.new))
        if now < old:
            return f"Kubernetes {change.old} -> {change.new} is a downgrade, which EKS does not do"
        if now[0] != old[0] or now[1] - old[1] > 1:
            return f"Kubernetes {change.old} -> {change.new} skips a minor version; EKS upgrades one at a time"
    if change.pattern == ("slurm", "identity", "users", ANY_NAME) and change.action == "add":
        return _uid_reuse(change.key[-1], deployed, new)
    if change.pattern == ("slurm", "identity", "groups"):
        return _gid_problems(change.old or {}, change.new or {})
    if kind is Kind.IDENTITY:
        return f"{name} changes from {change.old} to {change.new}"
    return ""


def _uid_reuse(person: str, deployed: dict[str, Any], new: dict[str, Any]) -> str:
    users = deployed.get("slurm", {}).get("identity", {}).get("users", {})
    uid = new["slurm"]["identity"]["users"][person]["uid"]
    holders = [name for name, p in users.items() if p.get("uid") == uid and name != person]
    return f"UID {uid} of new person {person} belonged to {holders[0]}, whose files still carry it" if holders else ""


def _gid_problems(old: dict[str, int], new: dict[str, int]) -> str:
    changed = [f"{g} {old[g]} -> {new[g]}" for g in sorted(old.keys() & new.keys()) if old[g] != new[g]]
    owners = {gid: g for g, gid in old.items()}
    reused = [f"GID {gid} of new group {g} belonged to {owners[gid]}" for g, gid in sorted(new.items())
              if g not in old and gid in owners]
    return "; ".join([*(f"group GID changed: {c}" for c in changed), *reused])


def apply_force(changes: list[Change], keys: list[str]) -> list[str]:
    """Mark the changes each `--force KEY` names (the key itself, a key above it, or its pattern such as
    `partitions.*`); the keys that name no change, which are a mistake to report."""
    unused = []
    for key in keys:
        named = [c for c in changes if c.name == key or c.name.startswith((f"{key}.", f"{key}["))
                 or text(c.pattern) == key]
        for change in named:
            change.forced = True
        if not named:
            unused.append(key)
    return unused
