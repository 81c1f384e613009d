"""The changes that take the current state to the desired one, in an order sacctmgr can apply.

Order: QoS first (accounts name them), then accounts parents before children (a child names its parent),
then users (they join accounts; a new user is added with its default account first, an existing one gets
its new default before it leaves the old one, and a user leaving every account leaves its default one last:
slurmdbd refuses to remove a user's default association unless it removes all of the user's associations,
SchedMD/slurm slurm-25-11-7-1 src/plugins/accounting_storage/mysql/accounting_storage_mysql.c
`_check_is_def_acct_before_remove`; 22.05 let it through, 23.11 fixed that, CHANGELOG/slurm-23.11.md "Fix
sanity check to prevent deleting default account of users"). Removals come last and in reverse: users'
associations, accounts children first, then QoS.

What the reconcile manages: the objects the document declares, and the QoS and accounts whose Description
ends with the marker (`values.MARKER`: it wrote them, so a stack that drops one gets it removed), with the
user associations inside those accounts. It never touches other QoS and accounts, Slurm's `root` account
(and so the cluster's association) or its `normal` QoS, and never removes the cluster.

What `sacctmgr remove` keeps: the job records (sacct, sreport) are never deleted by it. An association,
account or QoS that ever had a job is only marked deleted (its limits reset), so usage history stays; one
less than a day old with no job is deleted outright; anything with a running job is refused. Source:
accounting_storage_mysql.c `remove_common` (`_check_jobs_before_remove`, DELETE_SEC_BACK) and
`_remove_from_assoc_table` at slurm-25-11-6-1. Nothing here runs `sacctmgr archive` or purges.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from slurm.agent.accounts import values
from slurm.agent.accounts.errors import AccountsError
from slurm.agent.accounts.model import DEFAULT_QOS, ROOT_ACCOUNT, Account, Qos, State, User

Action = Literal["add", "modify", "remove"]
SIGN: dict[Action, str] = {"add": "+", "modify": "~", "remove": "-"}
TRES_SETTINGS = ("GrpTRES", "MaxTRESPerUser", "MaxTRESPerJob")
# Added with `sacctmgr add` only when set (an unset one is sacctmgr's default already).
_UNSET: tuple[Any, ...] = (None, {}, frozenset())


class PlanError(AccountsError):
    """The desired state cannot be reached without touching what the reconcile does not own."""


@dataclass(frozen=True)
class Change:
    action: Action
    kind: Literal["qos", "account", "user"]
    name: str
    details: str  # what changes, for people
    args: tuple[str, ...]  # sacctmgr's arguments after --immediate

    @property
    def text(self) -> str:
        return f"{SIGN[self.action]} {self.kind} {self.name}" + (f": {self.details}" if self.details else "")


def owned(thing: Qos | Account) -> bool:
    return thing.description.endswith(values.MARKER)


def show(key: str, value: Any) -> str:
    if key in TRES_SETTINGS:
        return values.show_tres(value)
    if key == "MaxWall":
        return values.show_minutes(value)
    if key == "QOS":
        return ",".join(sorted(value)) or "inherited"
    return "none" if value is None else str(value)


def _written(key: str, old: Any, new: Any) -> str:
    """What follows `KEY=` to turn `old` into `new`: -1 clears a limit, an empty QOS list inherits again."""
    if key in TRES_SETTINGS:
        return values.tres_assignment(old or {}, new)
    if key == "QOS":
        return ",".join(sorted(new))
    if new is None:
        return values.CLEAR
    return values.show_minutes(new) if key == "MaxWall" else str(new)


def _differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {key: (old.get(key), value) for key, value in new.items() if old.get(key) != value}


def _modify(kind: Literal["qos", "account", "user"], name: str, where: list[str],
            differences: dict[str, tuple[Any, Any]]) -> Change:
    details = ", ".join(f"{key} {show(key, old)} -> {show(key, new)}" for key, (old, new) in differences.items())
    sets = [f"{key}={_written(key, old, new)}" for key, (old, new) in differences.items()]
    return Change("modify", kind, name, details, ("modify", kind, "where", f"name={name}", *where, "set", *sets))


def _add(kind: Literal["qos", "account"], name: str, where: list[str], settings: Mapping[str, Any]) -> Change:
    chosen = {key: value for key, value in settings.items() if value not in _UNSET}
    details = ", ".join(f"{key} {show(key, value)}" for key, value in chosen.items())
    sets = [f"{key}={_written(key, None, value)}" for key, value in chosen.items()]
    return Change("add", kind, name, details, ("add", kind, name, *where, *sets))


def _depth(accounts: Mapping[str, Account], name: str) -> int:
    depth, seen = 0, {name}
    while name in accounts and accounts[name].parent in accounts and accounts[name].parent not in seen:
        name = accounts[name].parent
        seen.add(name)
        depth += 1
    return depth


def _qos_changes(desired: State, current: State) -> Iterator[Change]:
    for name, qos in sorted(desired.qos.items()):
        if name not in current.qos:
            yield _add("qos", name, [], qos.settings())
        elif differences := _differences(current.qos[name].settings(), qos.settings()):
            yield _modify("qos", name, [], differences)


def _account_changes(desired: State, current: State) -> Iterator[Change]:
    on_cluster = [f"cluster={desired.cluster}"]
    for name in sorted(desired.accounts, key=lambda n: (_depth(desired.accounts, n), n)):
        account = desired.accounts[name]
        if name not in current.accounts:
            yield _add("account", name, on_cluster, account.settings())
        elif differences := _differences(current.accounts[name].settings(), account.settings()):
            yield _modify("account", name, on_cluster, differences)


def _user_changes(desired: State, current: State, managed: set[str]) -> tuple[list[Change], list[Change]]:
    """(additions and new defaults, removals) of users' associations within the managed accounts.

    slurmdbd refuses to remove a user's default association while the user keeps another one (see the module
    doc), so the default moves first to an association the user keeps: the declared default, or, for a user
    the stack no longer declares who keeps associations in accounts it does not manage, the first of those.
    A user who loses every association loses the default one last."""
    on_cluster = f"cluster={desired.cluster}"
    changes: list[Change] = []
    removals: list[Change] = []
    for name in sorted({*desired.users, *current.users}):
        want = desired.users.get(name)
        have = current.users.get(name, User(name, (), None))
        wanted = want.accounts if want else ()
        added = [a for a in wanted if a not in have.accounts]
        for index, account in enumerate(added):
            new_user = index == 0 and not have.accounts  # its first association: make it the default
            extra = [f"DefaultAccount={account}"] if new_user else []
            changes.append(Change("add", "user", name, f"account {account}",
                                  ("add", "user", name, f"account={account}", on_cluster, *extra)))
        removed = [a for a in have.accounts if a in managed and a not in wanted]
        kept = sorted(a for a in {*have.accounts, *added} if a not in removed)
        default_after = have.default_account if have.accounts else (wanted[0] if wanted else None)
        default_wanted = want.default_account if want else (
            kept[0] if default_after in removed and kept else default_after)
        if default_after != default_wanted:
            changes.append(_modify("user", name, [on_cluster], {"DefaultAccount": (default_after, default_wanted)}))
        removals += [Change("remove", "user", name, f"account {account}",
                            ("remove", "user", "where", f"name={name}", f"account={account}", on_cluster))
                     for account in sorted(removed, key=lambda a: a == default_wanted)]
    return changes, removals


def _account_removals(desired: State, current: State) -> Iterator[Change]:
    gone = {name for name, account in current.accounts.items()
            if owned(account) and name not in desired.accounts and name != ROOT_ACCOUNT}
    for name in sorted(gone, key=lambda n: (-_depth(current.accounts, n), n)):
        kept = sorted(child.name for child in current.accounts.values()
                      if child.parent == name and child.name not in gone and child.name not in desired.accounts)
        if kept:
            raise PlanError(f"account {name} is no longer declared, but account(s) {', '.join(kept)} below it are "
                            "not managed by slurm-eks: removing it would remove them too; move them first")
        yield Change("remove", "account", name, "", ("remove", "account", "where", f"name={name}",
                                                       f"cluster={desired.cluster}"))


def _qos_removals(desired: State, current: State) -> Iterator[Change]:
    for name, qos in sorted(current.qos.items()):
        if owned(qos) and name not in desired.qos and name != DEFAULT_QOS:
            yield Change("remove", "qos", name, "", ("remove", "qos", "where", f"name={name}"))


def plan(desired: State, current: State) -> list[Change]:
    """The ordered changes; empty when the current state is the desired one."""
    managed = {*desired.accounts, *(name for name, account in current.accounts.items() if owned(account))}
    users, user_removals = _user_changes(desired, current, managed - {ROOT_ACCOUNT})
    return [*_qos_changes(desired, current), *_account_changes(desired, current), *users,
            *user_removals, *_account_removals(desired, current), *_qos_removals(desired, current)]


def render(changes: list[Change]) -> str:
    if not changes:
        return "No changes: Slurm's accounts, users and QoS are as the stack declares.\n"
    counts = {action: sum(c.action == action for c in changes) for action in SIGN}
    summary = f"{counts['add']} to add, {counts['modify']} to change, {counts['remove']} to remove"
    return "\n".join([summary, *(c.text for c in changes)]) + "\n"
